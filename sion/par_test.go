package sion

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// writePar writes the par pattern: chunks {1000,1500,100,3000}; rank 0
// 5x500 'a', rank 1 2x1000 'b', rank 2 nothing, rank 3 4x1000 'd'.
func writePar(c comm.Comm, name string, nfiles int, o *Options) error {
	chunks := []int64{1000, 1500, 100, 3000}
	pw, err := ParCreate(c, vfd.Sec2{}, name, chunks[c.Rank()], nfiles, o)
	if err != nil {
		return err
	}
	pattern := map[int][]int{0: {500, 500, 500, 500, 500}, 1: {1000, 1000}, 3: {1000, 1000, 1000, 1000}}
	letter := []byte{'a', 'b', 'c', 'd'}[c.Rank()]
	for _, n := range pattern[c.Rank()] {
		if o != nil && o.KeyVal {
			continue
		}
		if _, err := pw.Write(bytes.Repeat([]byte{letter}, n)); err != nil {
			return err
		}
	}
	if o != nil && o.KeyVal {
		for k, n := range pattern[c.Rank()] {
			if err := pw.Task(0).WriteRecord(int64(7+k), bytes.Repeat([]byte{letter}, n)); err != nil {
				return err
			}
		}
	}
	return pw.Close()
}

func assertSameFile(t *testing.T, ref, got string) {
	t.Helper()
	want, err := os.ReadFile(testdata(ref))
	require.NoError(t, err)
	b, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, len(want), len(b), "size of %s vs %s", got, ref)
	if !assert.True(t, bytes.Equal(want, b), "bytes of %s differ from %s", got, ref) {
		for i := range b {
			if b[i] != want[i] {
				t.Logf("first difference at %d: got %x want %x", i, b[i:min(i+16, len(b))], want[i:min(i+16, len(b))])
				break
			}
		}
	}
}

func TestParallelWriterByteIdentical(t *testing.T) {
	t.Run("par1", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "par1.sion")
		require.NoError(t, comm.Run(4, func(c comm.Comm) error { return writePar(c, name, 1, &Options{FSBlkSize: 1024}) }))
		assertSameFile(t, "par1.sion", name)
	})
	t.Run("par2", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "par2.sion")
		require.NoError(t, comm.Run(4, func(c comm.Comm) error { return writePar(c, name, 2, &Options{FSBlkSize: 1024}) }))
		assertSameFile(t, "par2.sion", name)
		assertSameFile(t, "par2.sion.000001", name+".000001")
		r, err := Open(vfd.Sec2{}, name)
		require.NoError(t, err)
		defer r.Close()
		for i, w := range parTasks {
			b, err := r.ReadTask(i)
			require.NoError(t, err)
			assert.Equal(t, w.sha, shaPrefix(b))
		}
	})
	t.Run("kv", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "kv.sion")
		require.NoError(t, comm.Run(4, func(c comm.Comm) error {
			return writePar(c, name, 1, &Options{FSBlkSize: 1024, KeyVal: true})
		}))
		assertSameFile(t, "kv.sion", name)
	})
	t.Run("mapped1", func(t *testing.T) {
		name := filepath.Join(t.TempDir(), "mapped1.sion")
		require.NoError(t, comm.Run(2, func(c comm.Comm) error {
			var tasks []MappedTask
			for k := 0; k < 2; k++ {
				g := 2*c.Rank() + k
				tasks = append(tasks, MappedTask{GlobalRank: int64(g), ChunkSize: int64(700 + 100*g), File: 0, LocalRank: g})
			}
			pw, err := CreateMapped(c, vfd.Sec2{}, name, tasks, 1, &Options{FSBlkSize: 1024})
			if err != nil {
				return err
			}
			for k, tk := range tasks {
				g := int(tk.GlobalRank)
				if _, err := pw.Task(k).Write(bytes.Repeat([]byte{byte('A' + g)}, 500+10*g)); err != nil {
					return err
				}
			}
			return pw.Close()
		}))
		assertSameFile(t, "mapped1.sion", name)
	})
}

// TestInPlaceWritesFinalNames: with InPlace the set is written under its
// final names, byte for byte the golden files, with no temporary file
// ever; Abort removes what it wrote.
func TestInPlaceWritesFinalNames(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "par2.sion")
	d := vfd.NewFault(vfd.Sec2{}, vfd.InjectorFunc(func(op vfd.Op) error {
		if strings.HasSuffix(op.Path, TmpSuffix) || strings.HasSuffix(op.NewPath, TmpSuffix) || op.Kind == vfd.OpRename {
			return fmt.Errorf("%v %s: a temporary name or a rename", op.Kind, op.Path)
		}
		return nil
	}))
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		chunks := []int64{1000, 1500, 100, 3000}
		pw, err := ParCreate(c, d, name, chunks[c.Rank()], 2, &Options{FSBlkSize: 1024, InPlace: true})
		if err != nil {
			return err
		}
		pattern := map[int][]int{0: {500, 500, 500, 500, 500}, 1: {1000, 1000}, 3: {1000, 1000, 1000, 1000}}
		for _, n := range pattern[c.Rank()] {
			if _, err := pw.Write(bytes.Repeat([]byte{[]byte{'a', 'b', 'c', 'd'}[c.Rank()]}, n)); err != nil {
				return err
			}
		}
		return pw.Close()
	}))
	assertSameFile(t, "par2.sion", name)
	assertSameFile(t, "par2.sion.000001", name+".000001")

	aborted := filepath.Join(dir, "aborted.sion")
	require.NoError(t, comm.Run(4, func(c comm.Comm) error {
		pw, err := ParCreate(c, d, aborted, 1000, 2, &Options{FSBlkSize: 1024, InPlace: true})
		if err != nil {
			return err
		}
		if _, err := os.Stat(aborted); err != nil {
			return fmt.Errorf("not under its final name while written: %w", err)
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		return pw.Abort()
	}))
	for _, n := range []string{aborted, aborted + ".000001"} {
		_, err := os.Stat(n)
		assert.ErrorIs(t, err, os.ErrNotExist, n)
	}
}

func TestNoCommitLeavesTmpFiles(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "par2.sion")
	require.NoError(t, comm.Run(4, func(c comm.Comm) error { return writePar(c, name, 2, &Options{FSBlkSize: 1024, NoCommit: true}) }))
	for _, n := range []string{name, name + ".000001"} {
		_, err := os.Stat(n)
		assert.ErrorIs(t, err, os.ErrNotExist)
	}
	require.NoError(t, os.Rename(name+".000001"+TmpSuffix, name+".000001"))
	require.NoError(t, os.Rename(name+TmpSuffix, name))
	assertSameFile(t, "par2.sion", name)
	assertSameFile(t, "par2.sion.000001", name+".000001")
}
