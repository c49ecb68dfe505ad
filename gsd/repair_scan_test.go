package gsd

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// legacyRepairScan is Repair's index walk as it was before scanForRepair,
// kept as the reference the one-pass walk must agree with: one read per
// slot for the valid prefix, a second read per used slot to count them,
// and batched reads of the zero tail.
func legacyRepairScan(r io.ReaderAt, path string, h Header, size int64, names []string, slots uint64) (repairScan, error) {
	v1 := h.GSDVersion < Version2
	cut := slots < h.IndexAllocated
	st := &state{size: size, hdr: h, names: names}
	var kept []Entry
	reason := ""
	dirtyTail := false
	for s := uint64(0); s < slots; s++ {
		b := make([]byte, entrySize)
		if err := readFull(r, b, h.IndexLocation+int64(s)*entrySize); err != nil {
			return repairScan{}, fmt.Errorf("gsd: repair %s: read index: %w", path, err)
		}
		e := decodeEntry(b)
		if e.Location == 0 {
			dirtyTail = slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) || !legacyZeroSlots(r, h.IndexLocation, s+1, slots)
			cut = false
			break
		}
		st.entries = kept
		if err := st.check(path, int64(s), e); err != nil {
			reason = err.Error()
		} else if e.Frame >= uint64(size)/entrySize {
			reason = fmt.Sprintf("entry %d: frame %d cannot be indexed in a file of %d bytes", s, e.Frame, size)
		} else if e.Type == TypeCharacter || e.M == 0 || e.Flags != 0 {
			reason = fmt.Sprintf("entry %d: type %s, M %d, flags %d", s, e.Type, e.M, e.Flags)
		} else if n := len(kept); n > 0 && !v1 && e.Frame == kept[n-1].Frame && e.ID <= kept[n-1].ID {
			reason = fmt.Sprintf("entry %d: not sorted by (frame, id)", s)
		}
		if reason != "" {
			kept = dropFrame(kept, firstSuspectFrame(kept, e, v1, h.IndexAllocated, size, len(names)))
			cut = false
			break
		}
		kept = append(kept, e)
		if s == slots-1 && cut {
			reason = "index block cut by the end of file"
			kept = dropFrame(kept, e.Frame)
		}
	}
	return repairScan{kept: kept, used: legacyCountUsed(r, h, slots), reason: reason, dirtyTail: dirtyTail, cut: cut}, nil
}

func legacyZeroSlots(r io.ReaderAt, loc int64, from, to uint64) bool {
	buf := make([]byte, entrySize*entryBatch)
	for s := from; s < to; {
		n := min(to-s, entryBatch)
		b := buf[:n*entrySize]
		if readFull(r, b, loc+int64(s)*entrySize) != nil || slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) {
			return false
		}
		s += n
	}
	return true
}

func legacyCountUsed(r io.ReaderAt, h Header, slots uint64) int {
	b := make([]byte, 8)
	n := 0
	for s := uint64(0); s < slots; s++ {
		if readFull(r, b, h.IndexLocation+int64(s)*entrySize+16) != nil || binary.LittleEndian.Uint64(b) == 0 {
			break
		}
		n++
	}
	return n
}

// repairSlots is the number of index slots inside a file, as repairFile
// computes it.
func repairSlots(h Header, size int64) uint64 {
	if h.IndexLocation >= headerSize && h.IndexLocation <= size {
		return min(h.IndexAllocated, uint64(size-h.IndexLocation)/entrySize)
	}
	return 0
}

// scanBoth runs the one-pass and the legacy walk over data and requires
// the same result; it returns the one-pass result and the read counts.
func scanBoth(t *testing.T, data []byte, names []string) (repairScan, int, int) {
	t.Helper()
	size := int64(len(data))
	h, err := readHeader(bytes.NewReader(data), size, "x.gsd")
	require.NoError(t, err)
	slots := repairSlots(h, size)
	newR := &failingReader{r: bytes.NewReader(data), failAt: -1}
	oldR := &failingReader{r: bytes.NewReader(data), failAt: -1}
	got, err := scanForRepair(newR, "x.gsd", h, size, names, slots)
	require.NoError(t, err)
	want, err := legacyRepairScan(oldR, "x.gsd", h, size, names, slots)
	require.NoError(t, err)
	require.Equal(t, want, got)
	return got, newR.reads, oldR.reads
}

// TestRepairScanMatchesLegacy: on three.gsd with index bytes changed in
// turn and cut at every length, the one-pass walk finds what the
// slot-at-a-time walk found (kept entries, used count, reason, dirty tail,
// cut).
func TestRepairScanMatchesLegacy(t *testing.T) {
	base, err := os.ReadFile("testdata/three.gsd")
	require.NoError(t, err)
	h, err := readHeader(bytes.NewReader(base), int64(len(base)), "")
	require.NoError(t, err)
	names, err := readNames(bytes.NewReader(base), int64(len(base)), "", &h)
	require.NoError(t, err)
	// Every byte of the 7 used slots, the 3 unused slots after them and
	// the last slot.
	idx := int(h.IndexLocation)
	last := idx + int(h.IndexAllocated-1)*entrySize
	positions := make([]int, 0, 11*entrySize)
	for p := idx; p < idx+10*entrySize; p++ {
		positions = append(positions, p)
	}
	for p := last; p < last+entrySize; p++ {
		positions = append(positions, p)
	}
	reasons := map[bool]bool{}
	dirty, cut := 0, 0
	for _, p := range positions {
		for _, v := range []byte{0, 1, 11, 0xff} {
			b := bytes.Clone(base)
			b[p] = v
			sc, _, _ := scanBoth(t, b, names)
			reasons[sc.reason != ""] = true
			if sc.dirtyTail {
				dirty++
			}
		}
	}
	for n := headerSize; n <= len(base); n++ {
		if sc, _, _ := scanBoth(t, base[:n], names); sc.cut {
			cut++
		}
	}
	// The variants reached every branch.
	assert.True(t, reasons[true] && reasons[false])
	assert.Positive(t, dirty)
	assert.Positive(t, cut)
}

// TestRepairScanReads: on an index of 6000 used slots among 16384, the
// walk takes a few large reads where the slot-at-a-time walk took two per
// used slot, and both agree whether the damage is before, on or after a
// read boundary.
func TestRepairScanReads(t *testing.T) {
	const frames, capacity = 3000, 16384
	name := tmpName(t, "many.gsd")
	w, err := Create(sec2, name, "t", "t", MakeVersion(1, 0), WithSync(false), WithIndexCapacity(capacity))
	require.NoError(t, err)
	for f := range frames {
		require.NoError(t, WriteChunk(w, "a", []uint8{uint8(f)}, 1, 1))
		require.NoError(t, WriteChunk(w, "b", []int32{int32(f)}, 1, 1))
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, w.Close())
	base, err := os.ReadFile(name)
	require.NoError(t, err)
	h, err := readHeader(bytes.NewReader(base), int64(len(base)), "")
	require.NoError(t, err)
	require.Equal(t, uint64(capacity), h.IndexAllocated)
	names, err := readNames(bytes.NewReader(base), int64(len(base)), "", &h)
	require.NoError(t, err)
	slotByte := func(s, field int) int { return int(h.IndexLocation) + s*entrySize + field }
	tests := []struct {
		name      string
		mod       func(b []byte)
		kept      int
		used      int
		dirtyTail bool
	}{
		{"valid", func([]byte) {}, 2 * frames, 2 * frames, false},
		{"type 11 in the last entry", func(b []byte) { b[slotByte(2*frames-1, 30)] = 11 }, 2*frames - 2, 2 * frames, false},
		{"bad entry last of the first read", func(b []byte) { b[slotByte(entryBatch-1, 31)] = 1 }, entryBatch - 2, 2 * frames, false},
		{"bad entry first of the second read", func(b []byte) { b[slotByte(entryBatch, 31)] = 1 }, entryBatch, 2 * frames, false},
		{"tail not zero far after the used slots", func(b []byte) { b[slotByte(capacity-1, 3)] = 1 }, 2 * frames, 2 * frames, true},
		{"first unused slot not zero", func(b []byte) { b[slotByte(2*frames, 0)] = 1 }, 2 * frames, 2 * frames, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(base)
			tc.mod(b)
			sc, newReads, oldReads := scanBoth(t, b, names)
			assert.Len(t, sc.kept, tc.kept)
			assert.Equal(t, tc.used, sc.used)
			assert.Equal(t, tc.dirtyTail, sc.dirtyTail)
			// 16384 slots: reads of 4096, 8192, then the 4096 left.
			assert.LessOrEqual(t, newReads, 3)
			assert.GreaterOrEqual(t, oldReads, 2*tc.kept)
			t.Logf("index reads: %d in one pass, %d slot at a time", newReads, oldReads)
		})
	}
}

// TestRepairManySlots: Repair through a driver on the large file drops the
// frame of a bad entry and keeps the rest readable.
func TestRepairManySlots(t *testing.T) {
	const frames = 1500
	name := tmpName(t, "many.gsd")
	w, err := Create(sec2, name, "t", "t", MakeVersion(1, 0), WithSync(false))
	require.NoError(t, err)
	for f := range frames {
		require.NoError(t, WriteChunk(w, "a", []uint16{uint16(f)}, 1, 1))
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, w.Close())
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	h, err := readHeader(bytes.NewReader(b), int64(len(b)), "")
	require.NoError(t, err)
	b[int(h.IndexLocation)+1000*entrySize+30] = 11 // frame 1000
	require.NoError(t, os.WriteFile(name, b, 0o644))
	res, err := Repair(sec2, name)
	require.NoError(t, err)
	assert.Equal(t, RepairResult{Changed: true, Frames: 1000, Entries: 1000, Dropped: frames - 1000, Reason: "entry 1000: type char, M 1, flags 0"}, res)
	require.NoError(t, Verify(sec2, name))
	r, err := Open(sec2, name)
	require.NoError(t, err)
	defer r.Close()
	v, _, err := ReadChunk[uint16](r, 999, "a")
	require.NoError(t, err)
	assert.Equal(t, []uint16{999}, v)
}
