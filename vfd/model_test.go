package vfd_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestDriversAgainstModel runs the same random writes, truncates, reads
// and reopenings through every driver and compares each state with a
// byte-slice model. Offsets and sizes straddle family members, stdio
// buffers and direct-I/O blocks.
func TestDriversAgainstModel(t *testing.T) {
	drivers := []struct {
		name string
		new  func(t *testing.T) (vfd.Driver, string)
	}{
		{"sec2", func(t *testing.T) (vfd.Driver, string) { return vfd.Sec2{}, filepath.Join(t.TempDir(), "m") }},
		{"core", func(t *testing.T) (vfd.Driver, string) { return vfd.NewCore(), "m" }},
		{"family", func(t *testing.T) (vfd.Driver, string) { return vfd.NewFamily(vfd.NewCore(), 1000), "m-%d" }},
		{"stdio", func(t *testing.T) (vfd.Driver, string) { return vfd.NewStdio(vfd.NewCore(), 777), "m" }},
		{"stdio over family", func(t *testing.T) (vfd.Driver, string) {
			return vfd.NewStdio(vfd.NewFamily(vfd.NewCore(), 1000), 777), "m-%03d"
		}},
		{"split", func(t *testing.T) (vfd.Driver, string) {
			return vfd.NewSplit(vfd.NewCore(), "", vfd.NewCore(), ""), "m"
		}},
		{"direct", func(t *testing.T) (vfd.Driver, string) {
			d, err := vfd.NewDirect(512, 2048)
			require.NoError(t, err)
			return d, filepath.Join(directDir(t), "m")
		}},
	}
	for _, dr := range drivers {
		for seed := range uint64(3) {
			t.Run(fmt.Sprintf("%s/seed%d", dr.name, seed), func(t *testing.T) {
				d, name := dr.new(t)
				rng := rand.New(rand.NewPCG(seed, 4))
				f, err := vfd.Create(d, name)
				require.NoError(t, err)
				var model []byte
				for step := range 250 {
					switch op := rng.IntN(20); {
					case op < 11: // write
						off, n := rng.IntN(6000), rng.IntN(2500)+1
						b := bytes.Repeat([]byte{byte(step) | 1}, n)
						_, err := f.WriteAt(b, int64(off))
						require.NoError(t, err, "step %d", step)
						if off+n > len(model) {
							model = append(model, make([]byte, off+n-len(model))...)
						}
						copy(model[off:], b)
					case op < 14: // truncate
						size := rng.IntN(7000)
						require.NoError(t, f.Truncate(int64(size)), "step %d", step)
						if size < len(model) {
							model = model[:size]
						} else {
							model = append(model, make([]byte, size-len(model))...)
						}
					case op < 18: // read a random range
						off, n := rng.IntN(7000), rng.IntN(3000)
						got := make([]byte, n)
						k, _ := f.ReadAt(got, int64(off))
						want := []byte{}
						if off < len(model) {
							want = model[off:min(len(model), off+n)]
						}
						require.Equal(t, len(want), k, "step %d: read %d at %d", step, n, off)
						require.True(t, bytes.Equal(want, got[:k]), "step %d: read %d at %d", step, n, off)
					case op < 19:
						require.NoError(t, f.Sync())
					default: // reopen
						require.NoError(t, f.Close())
						f, err = d.Open(name, vfd.ReadWrite)
						require.NoError(t, err, "step %d", step)
					}
					size, err := f.Size()
					require.NoError(t, err)
					require.Equal(t, int64(len(model)), size, "step %d", step)
				}
				require.NoError(t, f.Close())
				got, err := vfd.ReadFile(d, name)
				require.NoError(t, err)
				require.True(t, bytes.Equal(model, got))
			})
		}
	}
}
