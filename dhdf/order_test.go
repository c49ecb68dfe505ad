package dhdf

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/vfd"
)

// TestWriteOrderAndMemTypes records every write of a set through the
// fault driver: per file, raw data (MemDraw) first, then the global heap
// and object headers, and the superblock (MemSuper at offset 0) last,
// after a Sync; the MHF is created after every AHF was synced.
func TestWriteOrderAndMemTypes(t *testing.T) {
	c := vfd.NewCore()
	type rec struct {
		kind vfd.OpKind
		typ  vfd.MemType
		off  int64
	}
	ops := map[string][]rec{}
	var order []string
	d := vfd.NewFault(c, vfd.InjectorFunc(func(op vfd.Op) error {
		switch op.Kind {
		case vfd.OpWrite, vfd.OpSync:
			ops[op.Path] = append(ops[op.Path], rec{op.Kind, op.Type, op.Off})
		case vfd.OpOpen:
			order = append(order, op.Path)
		}
		return nil
	}))
	writeTinySet(t, d, "o")
	for _, name := range []string{"o.1.h5", "o.2.h5", "o.h5"} {
		rs := ops[name]
		require.GreaterOrEqual(t, len(rs), 4, name)
		last := rs[len(rs)-2]
		assert.Equal(t, rec{vfd.OpWrite, vfd.MemSuper, 0}, last, "%s: superblock is the last write", name)
		assert.Equal(t, vfd.OpSync, rs[len(rs)-1].kind, "%s: synced after the superblock", name)
		assert.Equal(t, vfd.OpSync, rs[len(rs)-3].kind, "%s: synced before the superblock", name)
		seenMeta := false
		for _, r := range rs[:len(rs)-3] {
			switch r.typ {
			case vfd.MemDraw:
				assert.False(t, seenMeta, "%s: raw data after metadata", name)
			case vfd.MemOHdr, vfd.MemGHeap:
				seenMeta = true
			default:
				t.Errorf("%s: unexpected write type %v", name, r.typ)
			}
		}
	}
	// The MHF is opened after both AHFs.
	require.NotEmpty(t, order)
	assert.Equal(t, "o.h5", order[len(order)-1])
	gheap := 0
	for _, r := range ops["o.h5"] {
		if r.typ == vfd.MemGHeap {
			gheap++
		}
	}
	assert.Equal(t, 1, gheap, "the MHF writes one global heap collection")
}

func TestOneSyncAHF(t *testing.T) {
	c := vfd.NewCore()
	syncs := map[string]int{}
	var lastWrite = map[string]vfd.MemType{}
	d := vfd.NewFault(c, vfd.InjectorFunc(func(op vfd.Op) error {
		switch op.Kind {
		case vfd.OpSync:
			syncs[op.Path]++
		case vfd.OpWrite:
			lastWrite[op.Path] = op.Type
		}
		return nil
	}))
	w, err := Create("one", 1, Options{Driver: d, OneSyncAHF: true, Now: fixedClock})
	require.NoError(t, err)
	require.NoError(t, w.DefineSDS(SDS{Name: "x", Type: h5.Int8, Dims: []uint64{2}}))
	require.NoError(t, w.WriteChunk("x", 1, "", []uint64{0}, []uint64{2}, []byte{4, 5}))
	require.NoError(t, w.Close())
	assert.Equal(t, 1, syncs["one.1.h5"], "one sync per AHF")
	assert.Equal(t, 2, syncs["one.h5"], "the MHF keeps its ordered commit")
	assert.Equal(t, vfd.MemSuper, lastWrite["one.1.h5"])
	assert.Equal(t, vfd.MemSuper, lastWrite["one.h5"])
	s, err := Open("one.h5", Options{Driver: c})
	require.NoError(t, err)
	got, err := s.ReadSDS("x")
	require.NoError(t, err)
	assert.Equal(t, []byte{4, 5}, got)
	require.NoError(t, s.Close())
}

// TestLargeChunkSyncedEarly: a chunk of earlySyncSize bytes is synced
// as soon as it is written (while its CRC is computed), before the
// ordered commit's two syncs.
func TestLargeChunkSyncedEarly(t *testing.T) {
	c := vfd.NewCore()
	var kinds []vfd.OpKind
	d := vfd.NewFault(c, vfd.InjectorFunc(func(op vfd.Op) error {
		if op.Path == "big.1.h5" && (op.Kind == vfd.OpSync || op.Kind == vfd.OpWrite) {
			kinds = append(kinds, op.Kind)
		}
		return nil
	}))
	w, err := Create("big", 1, Options{Driver: d, Now: fixedClock})
	require.NoError(t, err)
	require.NoError(t, w.DefineSDS(SDS{Name: "x", Type: h5.Uint8, Dims: []uint64{earlySyncSize}}))
	data := make([]byte, earlySyncSize)
	data[12345] = 9
	require.NoError(t, w.WriteChunk("x", 1, "", []uint64{0}, []uint64{earlySyncSize}, data))
	require.Equal(t, []vfd.OpKind{vfd.OpWrite, vfd.OpSync}, kinds, "data written and synced at once")
	require.NoError(t, w.Close())
	// Close: File_Info rows, object headers, sync, superblock, sync.
	assert.Equal(t, []vfd.OpKind{vfd.OpWrite, vfd.OpSync, vfd.OpWrite, vfd.OpWrite, vfd.OpSync, vfd.OpWrite, vfd.OpSync}, kinds)
	s, err := Open("big.h5", Options{Driver: c})
	require.NoError(t, err)
	got, err := s.ReadSDS("x")
	require.NoError(t, err)
	assert.Equal(t, data, got)
	require.NoError(t, s.Close())
}
