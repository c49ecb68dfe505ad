package gsd

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

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
	raw := make([]byte, headerSize)
	if err := readFull(r, raw, 0); err != nil {
		return &CorruptionError{Path: path, Part: "header", Entry: -1, Reason: "read header", Err: err}
	}
	for _, p := range headerStringProblems(raw) {
		add(corruptf(path, "header", p.off, "%s", p.reason))
	}
	sc, err := readNamelist(r, size, path, &h)
	if err != nil {
		return errors.Join(append(probs, err)...)
	}
	verifyNamelist(r, path, &h, sc, add)
	if !inFile(h.IndexLocation, h.IndexAllocated, entrySize, size) {
		add(corruptf(path, "index", h.IndexLocation, "index block of %d×32 bytes extends past the end of file (%d bytes)", h.IndexAllocated, size))
		return errors.Join(probs...)
	}
	if err := verifyIndex(r, size, path, &h, sc.names, add); err != nil {
		probs = append(probs, err)
	}
	return errors.Join(probs...)
}

// verifyNamelist reports, through add, the names real readers refuse:
// duplicates, invalid UTF-8, badly terminated or padded 1.0 slots, and
// non-zero bytes after the list.
func verifyNamelist(r io.ReaderAt, path string, h *Header, sc nameScan, add func(*CorruptionError) bool) {
	seen := make(map[string]bool, len(sc.names))
	for i, n := range sc.names {
		if seen[n] {
			add(corruptf(path, "namelist", h.NameLocation+sc.offsets[i], "duplicate name %q", n))
		}
		seen[n] = true
		if !utf8.ValidString(n) {
			add(corruptf(path, "namelist", h.NameLocation+sc.offsets[i], "name %d %q is not valid UTF-8 (python3-gsd cannot decode it)", i, n))
		}
	}
	for _, k := range sc.unterminatedV1 {
		add(corruptf(path, "namelist", h.NameLocation+sc.offsets[k], "1.0 name slot %d has no NUL", k))
	}
	for _, k := range sc.paddedV1 {
		add(corruptf(path, "namelist", h.NameLocation+sc.offsets[k], "1.0 name slot %d: bytes after the name's NUL are not zero", k))
	}
	if length := int64(h.NameAllocated) * nameBlockUnit; sc.end < length {
		ok, at, err := zeroFrom(r, h.NameLocation+sc.end, length-sc.end)
		switch {
		case err != nil:
			add(&CorruptionError{Path: path, Part: "namelist", Entry: -1, Offset: at, Reason: "read namelist", Err: err})
		case !ok:
			add(corruptf(path, "namelist", at, "bytes after the end of the name list are not zero (pygsd reads them as more names)"))
		}
	}
}

// verifyIndex reports, through add, every bad entry of the index and
// every non-zero unused slot. It stops when add says so, and returns the
// error of a failed read.
func verifyIndex(r io.ReaderAt, size int64, path string, h *Header, names []string, add func(*CorruptionError) bool) error {
	v2 := h.GSDVersion >= Version2
	var prev Entry
	used := uint64(0)
	terminated := false
	nonzero := func(eb []byte) bool { return slices.ContainsFunc(eb, func(c byte) bool { return c != 0 }) }
	return scanIndex(r, path, h.IndexLocation, 0, h.IndexAllocated, func(s uint64, eb []byte, e Entry) bool {
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
		reasons := entryProblems(e, h, len(names), size)
		if used > 1 {
			if reason := orderProblem(e, prev, v2); reason != "" {
				reasons = append(reasons, reason)
			}
		}
		prev = e
		for _, reason := range reasons {
			if !add(entryError(path, eoff, int64(s), e, names, "%s", reason)) {
				return false
			}
		}
		return true
	})
}

// entryProblems lists, in order, what is wrong with used index entry e
// by itself.
func entryProblems(e Entry, h *Header, nnames int, size int64) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	switch {
	case e.Type == TypeCharacter:
		bad("type 11 (character): python3-gsd 2.7 reports such files as corrupt")
	case !e.Type.Valid():
		bad("unknown type %d", e.Type)
	}
	if e.M == 0 {
		bad("M is 0")
	}
	if e.Flags != 0 {
		bad("flags %d, not 0", e.Flags)
	}
	if int(e.ID) >= nnames {
		bad("name id %d beyond the %d names", e.ID, nnames)
	}
	if e.Frame >= h.IndexAllocated {
		bad("frame %d not below index_allocated_entries %d (readers call that corrupt)", e.Frame, h.IndexAllocated)
	}
	if e.Location < 0 {
		bad("negative location %d", e.Location)
	}
	if ds, fits := e.DataSize(); !fits || e.Location < 0 || ds > size-e.Location {
		bad("data of %d×%d %s at %d extends past the end of file (%d bytes)", e.N, e.M, e.Type, e.Location, size)
	}
	return out
}

// orderProblem says how entry e breaks the index order after prev, or
// returns "" when it does not.
func orderProblem(e, prev Entry, v2 bool) string {
	switch {
	case e.Frame < prev.Frame || (v2 && e.Frame == prev.Frame && e.ID < prev.ID):
		return fmt.Sprintf("index not sorted by (frame, id): follows frame %d id %d", prev.Frame, prev.ID)
	case v2 && e.Frame == prev.Frame && e.ID == prev.ID:
		return fmt.Sprintf("duplicate (frame %d, id %d)", e.Frame, e.ID)
	}
	return ""
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
//
// A frame is dropped whole, also when the damaged field is a frame number
// and so the frame the bad entry belongs to is uncertain: every frame it
// may belong to is dropped (see docs/format/gsd.md). Names that are not
// valid UTF-8 are mended (U+FFFD for the bad bytes) rather than dropped.
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
	raw := make([]byte, headerSize)
	if err := vfd.ReadFull(f, raw, 0); err != nil {
		return res, fmt.Errorf("gsd: repair %s: read header: %w", path, err)
	}
	// Application and schema are rewritten valid and zero-padded (header
	// encode does both) when they were not.
	fixHeader := len(headerStringProblems(raw)) > 0
	h.Application = strings.ToValidUTF8(h.Application, "\uFFFD")
	h.Schema = strings.ToValidUTF8(h.Schema, "\uFFFD")
	v1 := h.GSDVersion < Version2
	// Namelist: use what is inside the file; a damaged list is rebuilt.
	names, rebuildNames, err := readNamesForRepair(f, path, h, size, v1)
	if err != nil {
		return res, err
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
	if reason == "" && !rebuildNames && !dirtyTail && !tooFewSlots && h.IndexAllocated > 0 && !cut && !fixHeader {
		return res, nil
	}
	res.Changed = true
	eof := size
	if rebuildNames {
		block, err := writeNamesForRepair(f, path, names, v1, eof)
		if err != nil {
			return res, err
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

// readNamesForRepair reads the namelist inside the file; rebuild says
// that it must be written anew (damaged, cut, overlapping the header,
// with invalid names, or absent).
func readNamesForRepair(f vfd.File, path string, h Header, size int64, v1 bool) (names []string, rebuild bool, err error) {
	if h.NameAllocated == 0 || h.NameLocation < 0 || h.NameLocation >= size {
		return nil, true, nil // no list inside the file
	}
	whole := inFile(h.NameLocation, h.NameAllocated, nameBlockUnit, size)
	length := size - h.NameLocation
	if whole {
		length = int64(h.NameAllocated) * nameBlockUnit
	}
	var nr io.ReaderAt = f
	// A namelist overlapping the header would change when the header
	// is rewritten: move it too.
	rebuild = !whole || h.NameLocation < headerSize
	if whole {
		var last [1]byte
		if err := vfd.ReadFull(f, last[:], h.NameLocation+length-1); err != nil {
			return nil, false, fmt.Errorf("gsd: repair %s: read namelist: %w", path, err)
		}
		if last[0] != 0 {
			// Read the block as if its last byte were the NUL it must be.
			rebuild = true
			nr = zeroAt{f, h.NameLocation + length - 1}
		}
	}
	sc, err := scanNames(nr, h.NameLocation, length, v1)
	if err != nil {
		var ne *errNamelist
		if errors.As(err, &ne) {
			return nil, false, corruptf(path, "namelist", h.NameLocation, "%s", ne.reason)
		}
		return nil, false, fmt.Errorf("gsd: repair %s: read namelist: %w", path, err)
	}
	names = sc.names
	if len(sc.paddedV1) > 0 || len(sc.unterminatedV1) > 0 {
		rebuild = true
	}
	if sc.end < length {
		// Bytes after the list's end must be zero (pygsd reads them).
		if ok, _, err := zeroFrom(nr, h.NameLocation+sc.end, length-sc.end); err != nil || !ok {
			rebuild = true
		}
	}
	if fixed, changed := validNames(names); changed {
		names, rebuild = fixed, true
	}
	return names, rebuild, nil
}

// writeNamesForRepair writes names as a fresh namelist block at eof and
// returns the block's size.
func writeNamesForRepair(f vfd.File, path string, names []string, v1 bool, eof int64) (int64, error) {
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
		return 0, fmt.Errorf("gsd: repair %s: write namelist: %w", path, err)
	}
	return block, nil
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
			sc.kept = dropFrame(sc.kept, firstSuspectFrame(sc.kept, e, v1, h.IndexAllocated, size, len(names)))
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
	// Blocks sized by what the file holds, not by what its header claims.
	block := int64(initNameBlocks * nameBlockUnit)
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
	capacity := uint64(initIndexSlots)
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

// zeroAt reads like r except that the byte at off reads as 0.
type zeroAt struct {
	r   io.ReaderAt
	off int64
}

func (z zeroAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := z.r.ReadAt(p, off)
	if i := z.off - off; i >= 0 && i < int64(n) {
		p[i] = 0
	}
	return n, err
}

// validNames returns names with every name that is not valid UTF-8
// rewritten (each bad byte sequence replaced by U+FFFD, then "~2", "~3"
// ... appended until it is unique), and whether any was.
func validNames(names []string) ([]string, bool) {
	bad := slices.ContainsFunc(names, func(n string) bool { return !utf8.ValidString(n) })
	if !bad {
		return names, false
	}
	out := slices.Clone(names)
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		seen[n] = true
	}
	for i, n := range out {
		if utf8.ValidString(n) {
			continue
		}
		base := strings.ToValidUTF8(n, "\uFFFD")
		m := base
		for k := 2; seen[m]; k++ {
			m = fmt.Sprintf("%s~%d", base, k)
		}
		seen[m] = true
		out[i] = m
	}
	return out, true
}

// headerProblem is one problem of the header's application or schema field.
type headerProblem struct {
	off    int64
	reason string
}

// headerStringProblems checks the application and schema fields of the
// raw 256-byte header as python3-gsd reads them: the text before the
// first NUL must be valid UTF-8 (both gsd.fl and pygsd decode it), and the
// bytes after it zero (pygsd strips only trailing NULs, so it would read
// them as part of the name).
func headerStringProblems(raw []byte) []headerProblem {
	var out []headerProblem
	for _, fld := range [...]struct {
		what string
		off  int
	}{{"application", offApp}, {"schema", offSchema}} {
		b := raw[fld.off : fld.off+fieldStrSize]
		s := cString(b)
		if !utf8.ValidString(s) {
			out = append(out, headerProblem{int64(fld.off), fmt.Sprintf("%s %q is not valid UTF-8 (python3-gsd cannot decode it)", fld.what, s)})
		}
		if len(s) == len(b) {
			out = append(out, headerProblem{int64(fld.off), fmt.Sprintf("%s field has no NUL", fld.what)})
		} else if k := slices.IndexFunc(b[len(s):], func(c byte) bool { return c != 0 }); k >= 0 {
			out = append(out, headerProblem{int64(fld.off + len(s) + k), fmt.Sprintf("bytes after the %s's NUL are not zero (pygsd reads them as part of it)", fld.what)})
		}
	}
	return out
}

// firstSuspectFrame returns the first frame that the bad entry b, found
// right after the valid entries kept, may belong to: [Repair] keeps only
// the frames before it, so that no frame is kept without one of its
// chunks. When b's trouble cannot be in its frame number (a bad type,
// name id, location, size, M or flags, with b sorted after the entry
// before it), b's frame is right and is the answer. When it can (b's
// frame is out of bounds or b breaks the (frame, id) order), the damaged
// field may be b's frame (b then belongs after the previous entry a), b's
// id, or a's frame or id (a passed the checks but jumped ahead of where
// it belongs, between the entry before it and b): the answer is the first
// frame any of these explanations allows, using the ids the namelist
// permits to rule some out.
func firstSuspectFrame(kept []Entry, b Entry, v1 bool, capacity uint64, size int64, nnames int) uint64 {
	frameBad := b.Frame >= capacity || b.Frame >= uint64(size)/entrySize
	ds, fits := b.DataSize()
	otherBad := !b.Type.Valid() || b.Type == TypeCharacter || b.M == 0 || b.Flags != 0 ||
		int(b.ID) >= nnames || b.Location < 0 || !fits || ds > size-b.Location
	n := len(kept)
	if n == 0 {
		if frameBad {
			return 0
		}
		return b.Frame
	}
	a := kept[n-1]
	// before reports whether x belongs before y in the index.
	before := func(x, y Entry) bool {
		if v1 {
			return x.Frame <= y.Frame
		}
		return x.Frame < y.Frame || (x.Frame == y.Frame && x.ID < y.ID)
	}
	orderBad := !before(a, b)
	if !frameBad && !orderBad {
		return b.Frame
	}
	// b's frame is wrong: b belongs after a.
	lo := a.Frame
	if !v1 && b.ID <= a.ID {
		lo = a.Frame + 1
	}
	if !orderBad || frameBad {
		return lo
	}
	// b's id is wrong (its frame, a's, is right): a's frame has an id
	// above a's the namelist allows.
	if !v1 && b.Frame == a.Frame && int(a.ID)+1 < nnames {
		lo = min(lo, a.Frame)
	}
	if otherBad {
		return lo
	}
	var p *Entry
	if n >= 2 {
		p = &kept[n-2]
	}
	// a's frame is wrong: its true frame f puts a after p and before b.
	from := uint64(0)
	if p != nil {
		from = p.Frame
		if !v1 && a.ID <= p.ID {
			from++
		}
	}
	upper, ok := b.Frame, true
	if !v1 && a.ID >= b.ID {
		upper, ok = b.Frame-1, b.Frame > 0
	}
	if ok && from <= upper {
		lo = min(lo, from)
	}
	// a's id is wrong (a's frame is b's): some id fits between p's and b's.
	if !v1 && a.Frame == b.Frame {
		lowY := 0
		if p != nil && p.Frame == a.Frame {
			lowY = int(p.ID) + 1
		}
		if lowY < int(b.ID) {
			lo = min(lo, a.Frame)
		}
	}
	return lo
}
