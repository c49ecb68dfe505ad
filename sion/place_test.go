package sion

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// writePlaced writes the par pattern (chunks {1000,1500,100,3000}, rank 0
// five blocks, rank 2 nothing) into nfiles files through d and returns
// each rank's place, as its writer gave it.
func writePlaced(d vfd.Driver, name string, nfiles int) ([]Place, error) {
	places := make([]Place, 4)
	if err := d.MkdirAll(path.Dir(name), 0o755); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	err := comm.Run(4, func(c comm.Comm) error {
		chunks := []int64{1000, 1500, 100, 3000}
		pw, err := ParCreate(c, d, name, chunks[c.Rank()], nfiles, &Options{FSBlkSize: 1024})
		if err != nil {
			return err
		}
		pattern := map[int][]int{0: {500, 500, 500, 500, 500}, 1: {1000, 1000}, 3: {1000, 1000, 1000, 1000}}
		for k, n := range pattern[c.Rank()] {
			if _, err := pw.Write(bytes.Repeat([]byte{byte('a' + c.Rank() + k)}, n)); err != nil {
				return err
			}
		}
		p, err := pw.Place(0)
		if err != nil {
			return err
		}
		mu.Lock()
		places[c.Rank()] = p
		mu.Unlock()
		return pw.Close()
	})
	return places, err
}

// TestOpenTaskMatchesOpen: a task opened alone from its place has the
// description and the bytes the whole container's reader gives it, in a
// single file and in a set of two.
func TestOpenTaskMatchesOpen(t *testing.T) {
	for _, nfiles := range []int{1, 2} {
		t.Run(fmt.Sprintf("nfiles=%d", nfiles), func(t *testing.T) {
			d := vfd.NewCore()
			name := "/c/placed.sion"
			places, err := writePlaced(d, name, nfiles)
			require.NoError(t, err)
			all, err := Open(d, name)
			require.NoError(t, err)
			defer all.Close()
			for rank, p := range places {
				want, err := all.Task(rank)
				require.NoError(t, err)
				assert.Equal(t, want.File, p.File, "rank %d", rank)
				r, err := OpenTask(d, name, int64(rank), p)
				require.NoError(t, err, "rank %d", rank)
				require.Equal(t, 1, r.NTasks())
				got, err := r.Task(0)
				require.NoError(t, err)
				want.Index, want.File = 0, 0
				assert.Equal(t, want, got, "rank %d", rank)
				wb, err := all.ReadTask(rank)
				require.NoError(t, err)
				gb, err := r.ReadTask(0)
				require.NoError(t, err)
				assert.Equal(t, wb, gb, "rank %d", rank)
				assert.Equal(t, SetMemberName(name, p.File), r.Files()[0].Name)
				assert.Equal(t, nfiles, r.Files()[0].NFiles)
				require.NoError(t, r.StartReadahead(0))
				require.NoError(t, r.Close())
			}
		})
	}
}

// TestOpenTaskFindsDamage: a damaged field of the task's metadata, or a
// place the file does not agree with, is a *CorruptionError naming the
// physical file and the offset of the field.
func TestOpenTaskFindsDamage(t *testing.T) {
	const n = 2 // tasks in each file of the two-file set
	type tc struct {
		name   string
		rank   int
		field  string
		off    func(sov int64) int64 // where to write; -1: no write
		val    uint64
		place  func(p *Place)
		is     error
		atWant func(sov int64) int64
	}
	// Rank 3 is local rank 1 of file 1.
	l := int64(1)
	cases := []tc{
		{name: "magic", rank: 3, field: "magic", off: func(int64) int64 { return 0 }, val: 0, is: ErrBadMagic},
		{name: "global rank", rank: 3, field: "globalrank[1]", off: func(int64) int64 { return meta1Fixed + 8*l }, val: 9, is: ErrInconsistent},
		{name: "chunk size", rank: 3, field: "chunksize[1]", off: func(int64) int64 { return meta1Fixed + 8*(n+l) }, val: 2048, is: ErrInconsistent},
		{name: "unclosed", rank: 3, field: "start_of_varheader", off: func(int64) int64 { return tailOffset(n) + 4 }, val: 0, is: ErrUnclosed},
		{name: "block count", rank: 3, field: "blockcount[1]", off: func(sov int64) int64 { return sov + 8*l }, val: 99, is: ErrInconsistent},
		{name: "block size", rank: 3, field: "blocksize[1][1]", off: func(sov int64) int64 { return sov + 8*n + 8*(1*n+l) }, val: 5000, is: ErrInconsistent},
		{name: "wrong chunk in the place", rank: 3, field: "chunksize[1]", place: func(p *Place) { p.Chunk += 1024; p.Skip += 1024 }, is: ErrInconsistent,
			atWant: func(int64) int64 { return meta1Fixed + 8*(n+l) }},
		{name: "wrong file in the place", rank: 3, field: "globalrank[1]", place: func(p *Place) { p.File = 0 }, is: ErrInconsistent,
			atWant: func(int64) int64 { return meta1Fixed + 8*l }},
		{name: "file number", rank: 3, field: "filenumber", off: func(int64) int64 { return offFileNumber }, val: 0, is: ErrInconsistent},
		{name: "start inside META1", rank: 3, field: "chunksize[1]", place: func(p *Place) { p.Start = 100 }, is: ErrInconsistent,
			atWant: func(int64) int64 { return meta1Fixed + 8*(n+l) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := vfd.NewCore()
			name := "/c/damaged.sion"
			places, err := writePlaced(d, name, 2)
			require.NoError(t, err)
			p := places[c.rank]
			phys := SetMemberName(name, p.File)
			f, err := d.Open(phys, vfd.ReadWrite)
			require.NoError(t, err)
			tb := make([]byte, 12)
			require.NoError(t, vfd.ReadFull(f, tb, tailOffset(n)))
			sov := int64(binary.LittleEndian.Uint64(tb[4:]))
			at := int64(0)
			if c.off != nil {
				at = c.off(sov)
				b := make([]byte, 8)
				binary.LittleEndian.PutUint64(b, c.val)
				if c.field == "magic" {
					b = []byte("SION")
				}
				_, err = f.WriteAt(b, at)
				require.NoError(t, err)
			}
			require.NoError(t, f.Close())
			if c.place != nil {
				c.place(&p)
				at = c.atWant(sov)
			}
			_, err = OpenTask(d, name, int64(c.rank), p)
			require.Error(t, err)
			require.ErrorIs(t, err, c.is)
			var ce *CorruptionError
			require.True(t, errors.As(err, &ce), "%v", err)
			if p.File == 0 {
				phys = name
			}
			assert.Equal(t, phys, ce.Path)
			assert.Equal(t, at, ce.Offset, "%v", err)
			assert.Equal(t, c.field, ce.Field)
		})
	}
	t.Run("bad place", func(t *testing.T) {
		_, err := OpenTask(vfd.NewCore(), "/x", 0, Place{Chunk: 10, Skip: 5})
		require.ErrorIs(t, err, ErrBadArgument)
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := OpenTask(vfd.NewCore(), "/x", 0, Place{Chunk: 10, Skip: 10, Start: 4096})
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrInconsistent)
	})
}

// FuzzOpenTask: any bytes and any place give a reader or an error,
// never a panic, and a reader's task lies inside the file.
func FuzzOpenTask(f *testing.F) {
	d := vfd.NewCore()
	for _, nf := range []int{1, 2} {
		name := fmt.Sprintf("/seed%d.sion", nf)
		places, err := writePlaced(d, name, nf)
		if err != nil {
			f.Fatal(err)
		}
		for rank, p := range places {
			b, err := vfd.ReadFile(d, SetMemberName(name, p.File))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b, int64(rank), p.File, p.LocalRank, p.Start, p.Skip, p.Chunk)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte, grank int64, file, lrank int, start, skip, chunk int64) {
		if file < 0 || file > 3 {
			return
		}
		d := vfd.NewCore()
		require.NoError(t, vfd.WriteFileAtomic(d, SetMemberName("/f.sion", file), b))
		r, err := OpenTask(d, "/f.sion", grank, Place{File: file, LocalRank: lrank, Start: start, Skip: skip, Chunk: chunk})
		if err != nil {
			return
		}
		defer r.Close()
		task, err := r.Task(0)
		require.NoError(t, err)
		for k, bs := range task.BlockSizes {
			assert.LessOrEqual(t, task.Start+int64(k)*task.GlobalSkip+bs, int64(len(b)))
		}
		_, err = r.ReadTask(0)
		assert.NoError(t, err)
	})
}
