package gsd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/vfd"
)

// maxProblems bounds the number of problems Verify reports.
const maxProblems = 50

// Verify checks the named file strictly against everything that breaks
// real GSD readers (header, namelist, every index entry, unused slots) and
// returns nil for a valid file or the problems found, joined, each a
// *CorruptionError naming the entry (or ErrNotGSD / ErrVersion).
func Verify(d vfd.Driver, name string) error {
	f, err := vfd.OpenRead(d, name)
	if err != nil {
		return fmt.Errorf("gsd: verify: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("gsd: verify: size of %s: %w", name, err)
	}
	return VerifyReaderAt(f, size, name)
}

// VerifyReaderAt is [Verify] for a file held in r with size bytes; path
// only names it in errors.
func VerifyReaderAt(r io.ReaderAt, size int64, path string) error {
	h, err := readHeader(r, size, path)
	if err != nil {
		return err
	}
	var probs []error
	add := func(e *CorruptionError) bool {
		probs = append(probs, e)
		return len(probs) < maxProblems
	}
	if h.IndexAllocated == 0 {
		add(corruptf(path, "header", offIndexAlloc, "index_allocated_entries is 0 (reference writers cannot grow it)"))
	}
	names, err := readNames(r, size, path, &h)
	if err != nil {
		return errors.Join(append(probs, err)...)
	}
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			add(corruptf(path, "namelist", h.NameLocation, "duplicate name %q", n))
		}
		seen[n] = true
	}
	if !inFile(h.IndexLocation, h.IndexAllocated, entrySize, size) {
		add(corruptf(path, "index", h.IndexLocation, "index block of %d×32 bytes extends past the end of file (%d bytes)", h.IndexAllocated, size))
		return errors.Join(probs...)
	}
	v2 := h.GSDVersion >= Version2
	var prev Entry
	used := uint64(0)
	terminated := false
	nonzero := func(eb []byte) bool { return slices.ContainsFunc(eb, func(c byte) bool { return c != 0 }) }
	err = scanIndex(r, path, h.IndexLocation, 0, h.IndexAllocated, func(s uint64, eb []byte, e Entry) bool {
		eoff := h.IndexLocation + int64(s)*entrySize
		if terminated {
			if nonzero(eb) {
				return add(corruptf(path, "index", eoff, "unused slot %d after the last used entry is not zero", s))
			}
			return true
		}
		if e.Location == 0 {
			terminated = true
			if nonzero(eb) {
				add(corruptf(path, "index", eoff, "unused slot %d is not zero", s))
			}
			return true
		}
		used++
		bad := func(format string, args ...any) bool {
			return add(entryError(path, eoff, int64(s), e, names, format, args...))
		}
		ok := true
		switch {
		case e.Type == TypeCharacter:
			ok = bad("type 11 (character): python3-gsd 2.7 reports such files as corrupt")
		case !e.Type.Valid():
			ok = bad("unknown type %d", e.Type)
		}
		if ok && e.M == 0 {
			ok = bad("M is 0")
		}
		if ok && e.Flags != 0 {
			ok = bad("flags %d, not 0", e.Flags)
		}
		if ok && int(e.ID) >= len(names) {
			ok = bad("name id %d beyond the %d names", e.ID, len(names))
		}
		if ok && e.Frame >= h.IndexAllocated {
			ok = bad("frame %d not below index_allocated_entries %d (readers call that corrupt)", e.Frame, h.IndexAllocated)
		}
		if ok && e.Location < 0 {
			ok = bad("negative location %d", e.Location)
		}
		if ds, fits := e.DataSize(); ok && (!fits || e.Location < 0 || ds > size-e.Location) {
			ok = bad("data of %d×%d %s at %d extends past the end of file (%d bytes)", e.N, e.M, e.Type, e.Location, size)
		}
		if ok && used > 1 {
			switch {
			case e.Frame < prev.Frame || (v2 && e.Frame == prev.Frame && e.ID < prev.ID):
				ok = bad("index not sorted by (frame, id): follows frame %d id %d", prev.Frame, prev.ID)
			case v2 && e.Frame == prev.Frame && e.ID == prev.ID:
				ok = bad("duplicate (frame %d, id %d)", e.Frame, e.ID)
			}
		}
		prev = e
		return ok
	})
	if err != nil {
		probs = append(probs, err)
	}
	return errors.Join(probs...)
}

// RepairResult says what [Repair] did.
type RepairResult struct {
	// Changed is false when the file was valid and left alone.
	Changed bool
	// Frames is the number of frames kept; Entries the index entries kept,
	// Dropped the entries removed.
	Frames  uint64
	Entries int
	Dropped int
	// Reason says why entries were dropped ("" when none were).
	Reason string
}

// Repair makes a damaged GSD file readable again: it keeps the longest
// prefix of complete frames whose entries are valid and whose data lies
// inside the file, writes a fresh index (and namelist, when that was
// damaged) at the end of the file, syncs, and rewrites the header. The
// header itself must be intact. A valid file is left alone.
func Repair(d vfd.Driver, name string, opts ...Option) (RepairResult, error) {
	o := buildOptions(opts)
	f, err := d.Open(name, vfd.ReadWrite)
	if err != nil {
		return RepairResult{}, fmt.Errorf("gsd: repair: %w", err)
	}
	res, err := repairFile(f, name, o)
	return res, errors.Join(err, f.Close())
}

func repairFile(f vfd.File, path string, o options) (RepairResult, error) {
	var res RepairResult
	size, err := f.Size()
	if err != nil {
		return res, fmt.Errorf("gsd: repair: size of %s: %w", path, err)
	}
	h, err := readHeader(f, size, path)
	if err != nil {
		return res, err
	}
	v1 := h.GSDVersion < Version2
	// Namelist: use what is inside the file; a damaged list is rebuilt.
	rebuildNames := false
	var names []string
	if h.NameAllocated > 0 && inFile(h.NameLocation, h.NameAllocated, nameBlockUnit, size) {
		blk := make([]byte, h.NameAllocated*nameBlockUnit)
		if err := vfd.ReadFull(f, blk, h.NameLocation); err != nil {
			return res, fmt.Errorf("gsd: repair %s: read namelist: %w", path, err)
		}
		// A namelist overlapping the header would change when the header is
		// rewritten: move it too.
		if blk[len(blk)-1] != 0 || h.NameLocation < headerSize {
			rebuildNames = true
			blk[len(blk)-1] = 0
		}
		if names, err = parseNames(blk, v1); err != nil {
			return res, corruptf(path, "namelist", h.NameLocation, "%v", err)
		}
	} else {
		rebuildNames = true
		if h.NameLocation >= 0 && h.NameLocation < size {
			avail := min(size-h.NameLocation, int64(min(h.NameAllocated, 1<<20))*nameBlockUnit)
			blk := make([]byte, avail)
			if err := vfd.ReadFull(f, blk, h.NameLocation); err != nil {
				return res, fmt.Errorf("gsd: repair %s: read namelist: %w", path, err)
			}
			// A name not followed by its NUL was cut: drop it.
			if !v1 {
				if i := slices.Index(blk, 0); i < 0 {
					blk = blk[:0]
				} else if k := bytes.LastIndexByte(blk, 0); k >= 0 {
					blk = blk[:k+1]
				}
			} else {
				blk = blk[:len(blk)/v1NameSize*v1NameSize]
			}
			names, _ = parseNames(blk, v1)
			if len(names) > maxNames {
				names = names[:maxNames]
			}
		}
	}
	// Index: the slots inside the file.
	slots := uint64(0)
	if h.IndexLocation >= headerSize && h.IndexLocation <= size {
		slots = min(h.IndexAllocated, uint64(size-h.IndexLocation)/entrySize)
	}
	sc, err := scanForRepair(f, path, h, size, names, slots)
	if err != nil {
		return res, err
	}
	kept, reason, dirtyTail, cut := sc.kept, sc.reason, sc.dirtyTail, sc.cut
	res.Entries = len(kept)
	res.Dropped = sc.used - len(kept)
	res.Reason = reason
	if len(kept) > 0 {
		res.Frames = kept[len(kept)-1].Frame + 1
	}
	tooFewSlots := res.Frames > h.IndexAllocated
	if reason == "" && !rebuildNames && !dirtyTail && !tooFewSlots && h.IndexAllocated > 0 && !cut {
		return res, nil
	}
	res.Changed = true
	eof := size
	if rebuildNames {
		var nb []byte
		for _, n := range names {
			if v1 {
				slot := make([]byte, v1NameSize)
				putCString(slot, n)
				nb = append(nb, slot...)
			} else {
				nb = append(append(nb, n...), 0)
			}
		}
		block := int64(initNameBlocks * nameBlockUnit)
		for block <= int64(len(nb)) {
			block *= 2
		}
		blk := make([]byte, block)
		copy(blk, nb)
		if _, err := f.WriteAt(blk, eof); err != nil {
			return res, fmt.Errorf("gsd: repair %s: write namelist: %w", path, err)
		}
		h.NameLocation, h.NameAllocated = eof, uint64(block/nameBlockUnit)
		eof += block
	}
	capacity := uint64(initIndexSlots)
	for capacity < uint64(len(kept)) || capacity < res.Frames+1 {
		capacity *= 2
	}
	if r := eof % entrySize; r != 0 {
		eof += entrySize - r
	}
	blk := make([]byte, capacity*entrySize)
	for i, e := range kept {
		encodeEntry(blk[i*entrySize:], e)
	}
	if _, err := f.WriteAt(blk, eof); err != nil {
		return res, fmt.Errorf("gsd: repair %s: write index: %w", path, err)
	}
	h.IndexLocation, h.IndexAllocated = eof, capacity
	if err := f.Sync(); err != nil {
		return res, fmt.Errorf("gsd: repair %s: sync: %w", path, err)
	}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return res, fmt.Errorf("gsd: repair %s: write header: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return res, fmt.Errorf("gsd: repair %s: sync: %w", path, err)
	}
	o.logger.Info("gsd file repaired", zap.String("gsd-file", path), zap.Uint64("frames", res.Frames),
		zap.Int("entries", res.Entries), zap.Int("dropped", res.Dropped), zap.String("reason", reason))
	return res, nil
}

// dropFrame removes the trailing entries of frame (an incomplete frame).
func dropFrame(es []Entry, frame uint64) []Entry {
	k := len(es)
	for k > 0 && es[k-1].Frame >= frame {
		k--
	}
	return es[:k]
}

// repairScan is what [Repair] learns from its one walk over the index.
type repairScan struct {
	// kept is the longest prefix of complete frames whose entries are valid.
	kept []Entry
	// used counts the slots before the first unused one (location 0).
	used int
	// reason says why entries were dropped ("" when none were).
	reason string
	// dirtyTail is set when an unused slot after the used ones is not zero.
	dirtyTail bool
	// cut is set when the end of file cuts the index block and every slot
	// inside the file is used.
	cut bool
}

// scanForRepair walks the first slots slots of the index once, in large
// reads (scanIndex): the valid prefix, then, after a bad entry, only the
// count of used slots, or, after the first unused slot, the check that
// the rest is zero. A failed read while the prefix is being taken is an
// error; later it ends the count, or marks the tail dirty.
func scanForRepair(r io.ReaderAt, path string, h Header, size int64, names []string, slots uint64) (repairScan, error) {
	const (
		keeping = iota
		counting
		checkingTail
	)
	sc := repairScan{cut: slots < h.IndexAllocated}
	st := &state{size: size, hdr: h, names: names}
	v1 := h.GSDVersion < Version2
	nonzero := func(b []byte) bool { return slices.ContainsFunc(b, func(c byte) bool { return c != 0 }) }
	phase := keeping
	err := scanIndex(r, path, h.IndexLocation, 0, slots, func(s uint64, raw []byte, e Entry) bool {
		switch phase {
		case checkingTail:
			sc.dirtyTail = nonzero(raw)
			return !sc.dirtyTail
		case counting:
			if e.Location == 0 {
				return false
			}
			sc.used++
			return true
		}
		if e.Location == 0 {
			// The rest must be zero; a fresh index is written if not.
			sc.dirtyTail = nonzero(raw)
			sc.cut = false
			phase = checkingTail
			return !sc.dirtyTail
		}
		sc.used++
		st.entries = sc.kept
		reason := ""
		if err := st.check(path, int64(s), e); err != nil {
			reason = err.Error()
		} else if e.Frame >= uint64(size)/entrySize {
			reason = fmt.Sprintf("entry %d: frame %d cannot be indexed in a file of %d bytes", s, e.Frame, size)
		} else if e.Type == TypeCharacter || e.M == 0 || e.Flags != 0 {
			reason = fmt.Sprintf("entry %d: type %s, M %d, flags %d", s, e.Type, e.M, e.Flags)
		} else if n := len(sc.kept); n > 0 && !v1 && e.Frame == sc.kept[n-1].Frame && e.ID <= sc.kept[n-1].ID {
			reason = fmt.Sprintf("entry %d: not sorted by (frame, id)", s)
		}
		if reason != "" {
			sc.reason = reason
			sc.kept = dropFrame(sc.kept, e.Frame)
			sc.cut = false
			phase = counting
			return true
		}
		sc.kept = append(sc.kept, e)
		if s == slots-1 && sc.cut {
			sc.reason = "index block cut by the end of file"
			sc.kept = dropFrame(sc.kept, e.Frame)
		}
		return true
	})
	var ce *CorruptionError
	switch {
	case err == nil:
	case phase == keeping && errors.As(err, &ce):
		return sc, fmt.Errorf("gsd: repair %s: read index: %w", path, ce.Err)
	case phase == keeping:
		return sc, fmt.Errorf("gsd: repair %s: read index: %w", path, err)
	case phase == checkingTail:
		sc.dirtyTail = true
	}
	return sc, nil
}

// Upgrade converts a 1.0 file to 2.0 in a crash-safe way: the index sorted
// by (frame, id) and the namelist in 2.x form are written at the end of
// the file and synced before the header is rewritten to point at them.
// A 2.x file is left alone.
func Upgrade(d vfd.Driver, name string) error {
	f, err := d.Open(name, vfd.ReadWrite)
	if err != nil {
		return fmt.Errorf("gsd: upgrade: %w", err)
	}
	err = upgradeFile(f, name)
	return errors.Join(err, f.Close())
}

func upgradeFile(f vfd.File, path string) error {
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("gsd: upgrade: size of %s: %w", path, err)
	}
	st, err := load(f, size, path, false)
	if err != nil {
		return err
	}
	if st.hdr.GSDVersion >= Version2 {
		return nil
	}
	h := st.hdr
	es := slices.Clone(st.entries)
	slices.SortStableFunc(es, func(a, b Entry) int {
		if a.Frame != b.Frame {
			if a.Frame < b.Frame {
				return -1
			}
			return 1
		}
		return int(a.ID) - int(b.ID)
	})
	var nb []byte
	for _, n := range st.names {
		nb = append(append(nb, n...), 0)
	}
	block := int64(h.NameAllocated) * nameBlockUnit
	for block <= int64(len(nb)) {
		block *= 2
	}
	eof := size
	blk := make([]byte, block)
	copy(blk, nb)
	if _, err := f.WriteAt(blk, eof); err != nil {
		return fmt.Errorf("gsd: upgrade %s: write namelist: %w", path, err)
	}
	h.NameLocation, h.NameAllocated = eof, uint64(block/nameBlockUnit)
	eof += block
	capacity := max(h.IndexAllocated, initIndexSlots)
	for capacity < uint64(len(es)) || capacity < st.nframes+1 {
		capacity *= 2
	}
	ib := make([]byte, capacity*entrySize)
	for i, e := range es {
		encodeEntry(ib[i*entrySize:], e)
	}
	if _, err := f.WriteAt(ib, eof); err != nil {
		return fmt.Errorf("gsd: upgrade %s: write index: %w", path, err)
	}
	h.IndexLocation, h.IndexAllocated = eof, capacity
	h.GSDVersion = Version2
	if err := f.Sync(); err != nil {
		return fmt.Errorf("gsd: upgrade %s: sync: %w", path, err)
	}
	if _, err := f.WriteAt(h.encode(), 0); err != nil {
		return fmt.Errorf("gsd: upgrade %s: write header: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("gsd: upgrade %s: sync: %w", path, err)
	}
	return nil
}
