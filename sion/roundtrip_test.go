package sion

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// randomWrites returns a task's writes: sizes up to 2.5 chunks, random bytes.
func randomWrites(rng *rand.Rand, chunk int64, strict bool) [][]byte {
	n := rng.IntN(8)
	ws := make([][]byte, n)
	for k := range ws {
		limit := chunk*5/2 + 1
		if strict {
			limit = chunk + 1
		}
		if chunk == 0 {
			limit = 1
		}
		b := make([]byte, rng.Int64N(limit))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		ws[k] = b
	}
	return ws
}

func TestRoundTripSerial(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			n := 1 + rng.IntN(9)
			o := &Options{FSBlkSize: int32(1) << (6 + rng.IntN(6)), ExactChunks: rng.IntN(2) == 0,
				Policy: Policy(rng.IntN(3)), BigEndian: rng.IntN(4) == 0}
			chunks := make([]int64, n)
			ranks := make([]int64, n)
			for i := range chunks {
				chunks[i] = 1 + rng.Int64N(3000)
				ranks[i] = rng.Int64N(1 << 40)
			}
			name := filepath.Join(t.TempDir(), "rt.sion")
			w, err := Create(vfd.Sec2{}, name, chunks, ranks, o)
			require.NoError(t, err)
			want := make([][]byte, n)
			for i := range chunks {
				for _, p := range randomWrites(rng, w.Task(i).chunk, o.Policy == PolicyStrict) {
					m, err := w.Task(i).Write(p)
					require.NoError(t, err)
					require.Equal(t, len(p), m)
					want[i] = append(want[i], p...)
				}
			}
			require.NoError(t, w.Close())
			r, err := Open(vfd.Sec2{}, name)
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, n, r.NTasks())
			assert.Equal(t, o.BigEndian, r.Files()[0].BigEndian)
			for i := range chunks {
				task, _ := r.Task(i)
				assert.Equal(t, ranks[i], task.GlobalRank)
				got, err := r.ReadTask(i)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(want[i], got), "task %d: %d bytes, want %d", i, len(got), len(want[i]))
				// Random access through ReadAt.
				if len(got) > 2 {
					sr, _ := r.TaskReader(i)
					off := rng.Int64N(int64(len(got)) - 1)
					buf := make([]byte, 1+rng.Int64N(int64(len(got))-off))
					_, err := sr.ReadAt(buf, off)
					require.NoError(t, err)
					assert.Equal(t, want[i][off:off+int64(len(buf))], buf)
				}
			}
		})
	}
}

func TestRoundTripParallel(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			size := 1 + rng.IntN(7)
			nfiles := 1 + rng.IntN(size)
			mapped := rng.IntN(2) == 0
			o := &Options{FSBlkSize: 512, Policy: PolicySplit, KeyVal: rng.IntN(4) == 0}
			name := filepath.Join(t.TempDir(), "rt.sion")
			// Plan every rank's tasks and data up front (deterministic).
			type plan struct {
				tasks  []MappedTask
				writes [][][]byte
			}
			plans := make([]plan, size)
			total := 0
			if mapped {
				// Global tasks 0..N-1 dealt to ranks round-robin; files by contiguous global rank.
				N := size + rng.IntN(2*size)
				per := make([]int, nfiles)
				for g := 0; g < N; g++ {
					f := min(g*nfiles/N, nfiles-1)
					r := g % size
					tk := MappedTask{GlobalRank: int64(g), ChunkSize: 1 + rng.Int64N(2000), File: f, LocalRank: per[f]}
					per[f]++
					plans[r].tasks = append(plans[r].tasks, tk)
				}
				total = N
				for f := range per {
					if per[f] == 0 {
						nfiles = f // fewer tasks than files: shrink
						break
					}
				}
			} else {
				for r := range plans {
					plans[r].tasks = []MappedTask{{GlobalRank: int64(r), ChunkSize: 1 + rng.Int64N(2000)}}
				}
				total = size
			}
			for r := range plans {
				for _, tk := range plans[r].tasks {
					plans[r].writes = append(plans[r].writes, randomWrites(rng, roundUp(tk.ChunkSize, 512), false))
				}
			}
			err := comm.Run(size, func(c comm.Comm) error {
				p := plans[c.Rank()]
				var pw *ParWriter
				var err error
				if mapped {
					pw, err = CreateMapped(c, vfd.Sec2{}, name, p.tasks, nfiles, o)
				} else {
					pw, err = ParCreate(c, vfd.Sec2{}, name, p.tasks[0].ChunkSize, nfiles, o)
				}
				if err != nil {
					return err
				}
				for k := range p.tasks {
					for key, data := range p.writes[k] {
						if o.KeyVal {
							err = pw.Task(k).WriteRecord(int64(key), data)
						} else {
							_, err = pw.Task(k).Write(data)
						}
						if err != nil {
							return err
						}
					}
				}
				return pw.Close()
			})
			require.NoError(t, err, "size %d nfiles %d mapped %v", size, nfiles, mapped)
			r, err := Open(vfd.Sec2{}, name)
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, total, r.NTasks())
			for _, p := range plans {
				for k, tk := range p.tasks {
					g := int(tk.GlobalRank)
					task, err := r.Task(g)
					require.NoError(t, err)
					assert.Equal(t, tk.GlobalRank, task.GlobalRank)
					if o.KeyVal {
						recs, err := r.Records(g)
						require.NoError(t, err)
						require.Len(t, recs, len(p.writes[k]))
						for key, data := range p.writes[k] {
							kr, n, err := r.KeyReader(g, int64(key))
							require.NoError(t, err)
							assert.Equal(t, int64(len(data)), n)
							var buf bytes.Buffer
							_, _ = buf.ReadFrom(kr)
							assert.True(t, bytes.Equal(data, buf.Bytes()))
						}
						continue
					}
					got, err := r.ReadTask(g)
					require.NoError(t, err)
					assert.True(t, bytes.Equal(bytes.Join(p.writes[k], nil), got), "task %d", g)
				}
			}
		})
	}
}
