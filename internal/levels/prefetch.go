package levels

import (
	"github.com/ftigo/ftigo/vfd"
)

// prefetch asks the storage to start reading this rank's data file of
// the newest committed checkpoint, the one a restart verifies first
// ([vfd.StartReadahead]), as soon as Open knows it: the device then reads
// it while the ranks finish the collective start-up (cleaning, directory
// syncs, the level-9 records), instead of after. Only a hint: a file
// that is missing, damaged or not the one recovered in the end costs a
// read of bytes nobody uses, and changes nothing. A rank whose data
// lives only in the L4 container gets its task read ahead there. Files
// of another shape, of a differential chain or in an HDF5 file are left
// alone.
func (e *Engine) prefetch() {
	n := len(e.committed)
	if n == 0 {
		return
	}
	m := e.committed[n-1]
	if m.Ranks != e.env.Comm.Size() || m.DCP != nil {
		return
	}
	f, ok := m.DataFile(e.env.Rank)
	if !ok || f.Attrs[AttrDigest] == DigestH5 || f.Size <= 0 {
		return
	}
	if f.Attrs[AttrInContainer] != "" {
		e.prefetchTask(f)
		return
	}
	s := e.env.Store(f.Where)
	if m.Level == L1 && wantImage(e.env, f) && f.Size <= preloadLimit {
		e.preload(m, s, f)
		return
	}
	file, err := s.Driver.Open(s.Path(f.Name), vfd.ReadOnly)
	if err != nil {
		return
	}
	_ = vfd.StartReadahead(file, 0, f.Size)
	_ = file.Close()
}

// prefetchTask starts reading this rank's task of the L4 container
// holding the data entry f (the task's metadata is read to find it; the
// restart reads it again from the page cache).
func (e *Engine) prefetchTask(f File) {
	cname, rank, ok := ContainerPath(f)
	if !ok {
		return
	}
	full := e.env.Global.Path(cname)
	cerr := func(off int64, err error) error { return err }
	r, t, err := openContainerTask(e.env.Global.Driver, full, f, rank, cerr)
	if err != nil {
		return
	}
	defer r.Close()
	if t.Size == f.Size {
		_ = r.StartReadahead(t.Index)
	}
}

// preloadLimit is the largest L1 data file [Engine.Open] verifies ahead
// ([preload]); a larger one only gets the read-ahead hint, as before.
// Measured with ftigo bench --cold, 4 ranks on 2 cores (2026-11-27,
// docs/performance.md, "L1 restart at 4 x 64 MiB"): at 64 MiB per rank
// the restart took 0.173-0.176 s against 0.181-0.201 s, at 256 MiB
// 0.67-0.80 s against 0.68-0.74 s (slower in 4 of 7 alternated pairs),
// so the larger files keep the former path until that is understood.
const preloadLimit = 128 << 20

// preload is a verification of this rank's data file of an L1
// checkpoint (reading it into memory, [verifyImage]) started by
// [Engine.Open] as soon as it knows the newest committed checkpoint, in
// the background: the reading, hashing and page faults of the image then
// overlap with the rest of the collective start-up (cleaning, directory
// syncs) instead of following it. [Local1.Recover] takes the result only
// for the same checkpoint and file; a failed verification is done again
// there, so its error is Recover's own.
type preload struct {
	seq  uint64
	dir  string
	drv  vfd.Driver
	f    File
	done chan struct{} // closed when img, err are set
	img  []byte
	err  error
}

// preload starts verifying f (of committed checkpoint m, in s) in the
// background for [Env.takeImage].
func (e *Engine) preload(m *Manifest, s Store, f File) {
	p := &preload{seq: m.Seq, dir: s.Dir, drv: s.Driver, f: f, done: make(chan struct{})}
	piece := transfer(e.env)
	go func() {
		defer close(p.done)
		p.img, p.err = verifyImage(s, f, piece)
	}()
	e.env.pre = p
}

// dropPreload waits for a verification started ahead that Recover did
// not take and drops its image.
func (e *Engine) dropPreload() {
	if p := e.env.pre; p != nil {
		e.env.pre = nil
		<-p.done
	}
}

// takeImage returns the verified image of the data entry f of m in s:
// the one [Engine.Open] started verifying ahead when it is of the same
// checkpoint and file and verified, else from a verification now
// ([verifyImage]).
func (env *Env) takeImage(m *Manifest, s Store, f File) ([]byte, error) {
	if p := env.pre; p != nil && p.seq == m.Seq && p.dir == s.Dir && sameDriver(p.drv, s.Driver) && sameEntry(p.f, f) {
		env.pre = nil
		<-p.done
		if p.err == nil {
			return p.img, nil
		}
	}
	return verifyImage(s, f, transfer(env))
}

// sameEntry reports whether a and b name the same bytes: the same file,
// size, digest and digest kind, of the same rank in the same area.
func sameEntry(a, b File) bool {
	return a.Name == b.Name && a.Where == b.Where && a.Of == b.Of && a.Size == b.Size && a.Digest == b.Digest &&
		a.Attrs[AttrDigest] == b.Attrs[AttrDigest] && a.Attrs[AttrInContainer] == b.Attrs[AttrInContainer]
}
