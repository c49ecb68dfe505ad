package partner

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// gateDriver holds the Sync of one file (held), or with holdWrites its
// writes, until another file (awaited) has been created, for at most a
// guard time; it records whether the guard ran out.
type gateDriver struct {
	vfd.Driver
	held, awaited string
	holdWrites    bool
	created       chan struct{}
	once          sync.Once
	mu            sync.Mutex
	timedOut      bool
}

func (d *gateDriver) Open(name string, flag vfd.Flag) (vfd.File, error) {
	f, err := d.Driver.Open(name, flag)
	if err != nil {
		return nil, err
	}
	switch name {
	case d.awaited:
		d.once.Do(func() { close(d.created) })
	case d.held:
		return &gateFile{File: f, d: d}, nil
	}
	return f, nil
}

type gateFile struct {
	vfd.File
	d *gateDriver
}

func (f *gateFile) wait() {
	select {
	case <-f.d.created:
	case <-time.After(5 * time.Second): // a guard against a hang, not a measure
		f.d.mu.Lock()
		f.d.timedOut = true
		f.d.mu.Unlock()
	}
}

func (f *gateFile) WriteAt(b []byte, off int64) (int, error) {
	if f.d.holdWrites {
		f.wait()
	}
	return f.File.WriteAt(b, off)
}

func (f *gateFile) Sync() error {
	if !f.d.holdWrites {
		f.wait()
	}
	return f.File.Sync()
}

// TestL2RestoreSyncBesideResend: when node 1 is lost, the fsync of the
// data file rank 1 restores from its copy runs beside the re-send of the
// copy rank 1 held (the copy's tmp file is created while that fsync is
// still pending), not before it; both files end up whole and published.
// Without the overlap the fsync waits for a file that is only created
// after it, and the guard runs out.
func TestL2RestoreSyncBesideResend(t *testing.T) {
	for _, image := range []bool{false, true} {
		name := map[bool]string{false: "to disk", true: "into memory"}[image]
		t.Run(name, func(t *testing.T) {
			gd := &gateDriver{Driver: vfd.NewCore(), created: make(chan struct{})}
			cl := newCluster(t, gd, 4, 1, 4, func(int) int { return 5000 })
			cl.l2Protect(512)
			gd.held, gd.awaited = cl.dataPath(1)+TmpSuffix, cl.copyPath(1)+TmpSuffix
			for _, f := range []string{cl.dataPath(1), cl.copyPath(1)} {
				require.NoError(t, cl.d.Remove(f))
			}
			o := Options{BlockSize: 512}
			if image {
				o.ImageLimit = 1 << 20
			}
			res := make([]L2Recovery, 4)
			errs := make([]error, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				res[c.Rank()], errs[c.Rank()] = RecoverPartner(c, cl.topo, o, cl.own(c.Rank()), cl.held(c.Rank()))
				return nil
			}))
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			assert.False(t, gd.timedOut, "the restored data file was synced before the held copy's re-send began")
			assert.True(t, res[1].OwnRebuilt)
			assert.True(t, res[1].HeldRebuilt)
			if image {
				assert.True(t, bytes.Equal(cl.data[1], res[1].OwnImage), "the image of the restored file")
			}
			cl.assertAllGood()
			assert.True(t, bytes.Equal(cl.data[1], cl.read(cl.dataPath(1))))
			assert.True(t, bytes.Equal(cl.data[0], cl.read(cl.copyPath(1))))
		})
	}
}
