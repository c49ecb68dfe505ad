package partner

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"path"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

var big = flag.Bool("big", false, "benchmark 256 MiB per rank (run with -benchtime=1x)")

// benchSizes are the per-rank sizes: 4 MiB with -short, 256 MiB with -big,
// else 64 MiB.
func benchSizes(b *testing.B) []int {
	switch {
	case testing.Short():
		return []int{4 << 20}
	case *big:
		return []int{256 << 20}
	}
	return []int{64 << 20}
}

const benchRanks = 4

// benchBlock is the transfer block size of the benchmarks. 8 MiB: with 4
// in-process ranks on a shared 2-core machine every round of the ring
// costs scheduling latency, so fewer, larger blocks measure the I/O.
const benchBlock = 8 << 20

type benchWorld struct {
	pool *Buffers
	dir  string
	topo *Topology
	data []byte
	hash encode.Hash
}

func newBenchWorld(b testing.TB, size int) *benchWorld {
	topo, err := NewTopology(benchRanks, 1, benchRanks, nil)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, size)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i+8 <= len(data); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			data[i+j] = byte(v >> (8 * j))
		}
	}
	w := &benchWorld{pool: &Buffers{}, dir: b.TempDir(), topo: topo, data: data, hash: encode.Sum(data)}
	for n := range benchRanks {
		if err := (vfd.Sec2{}).MkdirAll(w.node(n), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return w
}

func (w *benchWorld) node(n int) string { return path.Join(w.dir, fmt.Sprintf("node%04d", n)) }

// writeSync writes data to name in 8 MiB pieces and fsyncs: the physical
// reference and the data-write step of a checkpoint.
func writeSync(name string, data []byte) error {
	_ = (vfd.Sec2{}).Remove(name) // new files on both sides: no truncation cost
	f, err := vfd.CreateTrunc(vfd.Sec2{}, name)
	if err != nil {
		return err
	}
	for off := 0; off < len(data); off += 8 << 20 {
		if _, err := f.WriteAt(data[off:min(off+8<<20, len(data))], int64(off)); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeOverlapped writes data to name and returns a function that syncs
// and closes it, for a transfer to run beside the fsync as a checkpoint
// does at L2 and L3 (levels.DataReader).
func writeOverlapped(name string, data []byte) (func() error, error) {
	_ = (vfd.Sec2{}).Remove(name)
	f, err := vfd.CreateTrunc(vfd.Sec2{}, name)
	if err != nil {
		return nil, err
	}
	for off := 0; off < len(data); off += 8 << 20 {
		if _, err := f.WriteAt(data[off:min(off+8<<20, len(data))], int64(off)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return func() error { return errors.Join(f.Sync(), f.Close()) }, nil
}

// overlapped runs transfer beside the data file's fsync and joins both.
func overlapped(name string, data []byte, transfer func() error) error {
	sync, err := writeOverlapped(name, data)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- sync() }()
	err = transfer()
	return errors.Join(err, <-done)
}

// benchRaw runs the physical references of L2 and L3: every rank writes
// and fsyncs two files of its size, one after the other ("raw"), with
// the first file's fsync running while the second is written
// ("raw-overlapped"), and that with 16 MiB writes each followed by
// vfd.StartWriteback ("raw-strong", the strongest raw writer, see
// strongRaw). BenchmarkPartnerPaired measures them alternated with the
// levels in one run.
func benchRaw(b *testing.B, w *benchWorld, name string) {
	for _, label := range []string{"raw/", "raw-overlapped/", "raw-strong/"} {
		b.Run(label+name, func(b *testing.B) {
			b.SetBytes(int64(2 * benchRanks * len(w.data)))
			for b.Loop() {
				err := parallel(benchRanks, func(r int) error {
					a, bb := path.Join(w.node(r), "raw-a"), path.Join(w.node(r), "raw-b")
					switch label {
					case "raw-overlapped/":
						return overlapped(a, w.data, func() error { return writeSync(bb, w.data) })
					case "raw-strong/":
						return strongRaw(a, bb, w.data)
					}
					return errors.Join(writeSync(a, w.data), writeSync(bb, w.data))
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func parallel(n int, fn func(r int) error) error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = fn(r) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkL2 compares an L2 checkpoint (each of 4 ranks writes and syncs
// its file, then CopyToPartner) with the raw write+fsync of the same bytes
// (own file plus a copy-sized second file per rank). SetBytes counts the
// bytes persisted, so MB/s of the two read as a ratio.
func BenchmarkL2(b *testing.B) {
	for _, size := range benchSizes(b) {
		w := newBenchWorld(b, size)
		name := strconv.Itoa(size>>20) + "MiB"
		benchRaw(b, w, name)
		// l2: a checkpoint as the engine takes it: the copy learns the
		// data hash as it reads (the digest) while the data file syncs
		b.Run("l2/"+name, func(b *testing.B) {
			b.SetBytes(int64(2 * benchRanks * size))
			for b.Loop() {
				err := comm.Run(benchRanks, func(c comm.Comm) error {
					r := c.Rank()
					own := path.Join(w.node(r), "data")
					_ = (vfd.Sec2{}).Remove(path.Join(w.node(r), "copy"))
					return overlapped(own, w.data, func() error {
						_, err := CopyToPartner(c, w.topo, Options{Buffers: w.pool, BlockSize: benchBlock},
							FileInfo{Ref: Ref{vfd.Sec2{}, own}, Size: int64(size), HashUnknown: true}, Ref{vfd.Sec2{}, path.Join(w.node(r), "copy")})
						return err
					})
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		// l2-sequential: data written and synced first, then copied with
		// its hash known (and checked again, unless skip-source-hash)
		for _, skip := range []bool{false, true} {
			label := "l2-sequential/"
			if skip {
				label = "l2-sequential-skip-source-hash/"
			}
			b.Run(label+name, func(b *testing.B) {
				b.SetBytes(int64(2 * benchRanks * size))
				var copyTime time.Duration
				for b.Loop() {
					err := comm.Run(benchRanks, func(c comm.Comm) error {
						r := c.Rank()
						own := path.Join(w.node(r), "data")
						if err := writeSync(own, w.data); err != nil {
							return err
						}
						_ = (vfd.Sec2{}).Remove(path.Join(w.node(r), "copy"))
						t0 := time.Now()
						_, err := CopyToPartner(c, w.topo, Options{Buffers: w.pool, BlockSize: benchBlock, SkipSourceHash: skip},
							FileInfo{Ref: Ref{vfd.Sec2{}, own}, Size: int64(size), Hash: w.hash}, Ref{vfd.Sec2{}, path.Join(w.node(r), "copy")})
						if r == 0 {
							copyTime += time.Since(t0)
						}
						return err
					})
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(copyTime.Seconds()/float64(b.N), "copy-s/op")
			})
		}
	}
}

// BenchmarkL3 compares an L3 checkpoint (write+fsync of each rank's file,
// then EncodeGroup with k=m=4) with the raw write+fsync of data plus parity.
func BenchmarkL3(b *testing.B) {
	for _, size := range benchSizes(b) {
		w := newBenchWorld(b, size)
		name := strconv.Itoa(size>>20) + "MiB"
		benchRaw(b, w, name)
		// l3: a checkpoint as the engine takes it: the encoding learns
		// the data hash as it reads while the data file syncs
		b.Run("l3/"+name, func(b *testing.B) {
			b.SetBytes(int64(2 * benchRanks * size))
			for b.Loop() {
				err := comm.Run(benchRanks, func(c comm.Comm) error {
					r := c.Rank()
					own := path.Join(w.node(r), "data")
					_ = (vfd.Sec2{}).Remove(path.Join(w.node(r), "parity"))
					return overlapped(own, w.data, func() error {
						_, err := EncodeGroup(c, w.topo, Options{Buffers: w.pool, BlockSize: benchBlock}, 0,
							FileInfo{Ref: Ref{vfd.Sec2{}, own}, Size: int64(size), HashUnknown: true}, Ref{vfd.Sec2{}, path.Join(w.node(r), "parity")})
						return err
					})
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("l3-sequential/"+name, func(b *testing.B) {
			b.SetBytes(int64(2 * benchRanks * size))
			var encTime time.Duration
			for b.Loop() {
				err := comm.Run(benchRanks, func(c comm.Comm) error {
					r := c.Rank()
					own := path.Join(w.node(r), "data")
					if err := writeSync(own, w.data); err != nil {
						return err
					}
					_ = (vfd.Sec2{}).Remove(path.Join(w.node(r), "parity"))
					t0 := time.Now()
					_, err := EncodeGroup(c, w.topo, Options{Buffers: w.pool, BlockSize: benchBlock}, 0,
						FileInfo{Ref: Ref{vfd.Sec2{}, own}, Size: int64(size), Hash: w.hash}, Ref{vfd.Sec2{}, path.Join(w.node(r), "parity")})
					if r == 0 {
						encTime += time.Since(t0)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(encTime.Seconds()/float64(b.N), "encode-s/op")
		})
	}
}

// BenchmarkRestart measures recovery after node losses at 4 ranks on 4
// nodes (one group): L2 after losing one node's data file and copy, L3
// after losing one and two nodes (data and parity). Each iteration
// re-creates the checkpoint (not timed), erases the files and recovers.
func BenchmarkRestart(b *testing.B) {
	for _, size := range benchSizes(b) {
		w := newBenchWorld(b, size)
		name := strconv.Itoa(size>>20) + "MiB"
		o := Options{Buffers: w.pool, BlockSize: benchBlock}
		own := func(r int) FileInfo {
			return FileInfo{Ref: Ref{vfd.Sec2{}, path.Join(w.node(r), "data")}, Size: int64(size), Hash: w.hash}
		}
		ref := func(r int, n string) Ref { return Ref{vfd.Sec2{}, path.Join(w.node(r), n)} }
		setup := func(b *testing.B, level int) []Parity {
			b.StopTimer()
			defer b.StartTimer()
			par := make([]Parity, benchRanks)
			err := comm.Run(benchRanks, func(c comm.Comm) error {
				r := c.Rank()
				if err := writeSync(own(r).Path, w.data); err != nil {
					return err
				}
				var err error
				if level == 2 {
					_, err = CopyToPartner(c, w.topo, o, own(r), ref(r, "copy"))
				} else {
					par[r], err = EncodeGroup(c, w.topo, o, 0, own(r), ref(r, "parity"))
				}
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			return par
		}
		lose := func(b *testing.B, nodes ...int) {
			for _, n := range nodes {
				for _, f := range []string{"data", "copy", "parity"} {
					_ = (vfd.Sec2{}).Remove(path.Join(w.node(n), f))
				}
			}
		}
		b.Run("raw-read/"+name, func(b *testing.B) {
			// reference: every rank reads its file back
			b.SetBytes(int64(benchRanks * size))
			setup(b, 2)
			for b.Loop() {
				err := parallel(benchRanks, func(r int) error {
					f, err := vfd.OpenRead(vfd.Sec2{}, own(r).Path)
					if err != nil {
						return err
					}
					defer f.Close()
					_, err = encode.HashReader(f, int64(size), benchBlock)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("l2-one-node/"+name, func(b *testing.B) {
			b.SetBytes(int64(benchRanks * size))
			var took time.Duration
			for b.Loop() {
				setup(b, 2)
				lose(b, 1)
				t0 := time.Now()
				err := comm.Run(benchRanks, func(c comm.Comm) error {
					r := c.Rank()
					held := FileInfo{Ref: ref(r, "copy"), Size: int64(size), Hash: w.hash}
					_, err := RecoverPartner(c, w.topo, o, own(r), held)
					return err
				})
				took += time.Since(t0)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(took.Seconds()/float64(b.N), "recover-s/op")
		})
		for _, lost := range [][]int{{1}, {1, 2}} {
			b.Run(fmt.Sprintf("l3-%d-nodes/%s", len(lost), name), func(b *testing.B) {
				b.SetBytes(int64(benchRanks * size))
				var took time.Duration
				for b.Loop() {
					par := setup(b, 3)
					lose(b, lost...)
					t0 := time.Now()
					err := comm.Run(benchRanks, func(c comm.Comm) error {
						r := c.Rank()
						pi := FileInfo{Ref: ref(r, "parity"), Size: par[r].Size, Hash: par[r].Hash}
						_, err := RebuildGroup(c, w.topo, o, Shape{}, own(r), pi)
						return err
					})
					took += time.Since(t0)
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(took.Seconds()/float64(b.N), "recover-s/op")
			})
		}
	}
}
