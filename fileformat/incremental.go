package fileformat

import (
	"fmt"
	"slices"

	"github.com/ftigo/ftigo/vfd"
)

// Incremental writes one FTI-FF file variable by variable, as FTI's
// incremental checkpoint (iCP) does: [NewIncremental] places every
// variable (their sizes are fixed from then on) and writes the header,
// [Incremental.Add] writes one variable's data at its place whenever the
// caller is done with it, in any order, and [Incremental.Finish] writes
// the metadata block and the file block once every variable was added.
// The file is byte for byte what [Write] would have written for the data
// each variable had when it was added. Until Finish the file fails
// [Open] (its file block is missing). An Incremental is used by one
// goroutine.
type Incremental struct {
	w     *writer
	im    *image
	lay   *Layout
	meta  Meta
	hb    [HeaderSize]byte
	added map[int32]bool
	done  bool
}

// NewIncremental starts an FTI-FF file in f (truncated first) for vars,
// laid out after prev (nil for a fresh layout) as [Write] does. Only the
// ids, names, types and sizes of vars count here: each variable's bytes
// are taken when it is added.
func NewIncremental(f vfd.File, meta Meta, vars []Var, prev *Layout, opts ...Option) (*Incremental, error) {
	o := buildOptions(opts)
	if o.blockSize < MinBlockSize || o.blockSize > MaxBlockSize {
		return nil, fmt.Errorf("%w: block size %d outside [%d, %d]", ErrInvalid, o.blockSize, MinBlockSize, MaxBlockSize)
	}
	if meta.Rank < 0 {
		return nil, fmt.Errorf("%w: rank %d", ErrInvalid, meta.Rank)
	}
	vars = slices.Clone(vars)
	idx, err := checkVars(vars)
	if err != nil {
		return nil, err
	}
	ext, err := buildExt(&o, vars, idx)
	if err != nil {
		return nil, err
	}
	// Each variable is written at a place fixed here, before its bytes
	// are known: an incremental file stores no block compressed (a lossy
	// variable is still reduced, to a size known beforehand).
	for i := range vars {
		vars[i].Codec = CodecNone
	}
	vars, extra := storeVars(vars)
	lay, err := plan(vars, prev)
	if err != nil {
		return nil, err
	}
	if meta.Timestamp == 0 {
		meta.Timestamp = o.clock().UnixNano()
	}
	w := &writer{f: f, o: o, vars: vars, idx: idx, ext: ext, extra: extra}
	im, err := placeImage(lay, vars, idx, o.blockSize, ext)
	if err != nil {
		return nil, err
	}
	im.extra = extra
	if err := f.Truncate(0); err != nil {
		return nil, vfd.WrapPath(err, "write", f.Name())
	}
	hb := im.header(meta)
	if _, err := vfd.WriteAtType(f, vfd.MemSuper, hb[:], 0); err != nil {
		return nil, vfd.WrapPath(fmt.Errorf("header: %w", err), "write", f.Name())
	}
	return &Incremental{w: w, im: im, lay: lay, meta: meta, hb: hb, added: map[int32]bool{}}, nil
}

// Add writes variable id with data, which must have the size the
// variable had at NewIncremental; adding a variable again rewrites it.
func (x *Incremental) Add(id int32, data []byte) error {
	i, ok := x.w.idx[id]
	switch {
	case x.done:
		return fmt.Errorf("%w: variable %d added after Finish", ErrInvalid, id)
	case !ok:
		return fmt.Errorf("%w: variable %d is not in this file", ErrInvalid, id)
	case int64(len(data)) != x.im.logical(x.w.vars, i) || len(data)%max(int(x.w.vars[i].ElemSize), 1) != 0:
		return fmt.Errorf("%w: variable %d has %d bytes, the file was laid out for %d", ErrInvalid, id, len(data), x.im.logical(x.w.vars, i))
	}
	if v := &x.w.vars[i]; v.Lossy.Mode != Exact {
		data, x.w.extra[i].bound = lossyEncode(v.Lossy, v.Type, data)
	}
	x.w.vars[i].Data = data
	bs := x.w.o.blockSize
	for ci := range x.im.chunks {
		c := &x.im.chunks[ci]
		if c.VarID != id {
			continue
		}
		if !x.w.o.noHash {
			hashBlocks(x.w.chunkData(c), bs, c.BlockHashes, x.w.o.workers)
			c.Hash = chunkHash(c.Size, bs, c.BlockHashes)
		}
		if c.Size == 0 {
			continue
		}
		if err := writeStarting(x.w.f, x.w.chunkData(c), c.Fptr); err != nil {
			return vfd.WrapPath(fmt.Errorf("var %d chunk %d: %w", id, ci, err), "write", x.w.f.Name())
		}
	}
	x.added[id] = true
	return nil
}

// Missing returns the ids of the variables not added yet, in file order.
func (x *Incremental) Missing() []int32 {
	var out []int32
	for _, v := range x.w.vars {
		if !x.added[v.ID] {
			out = append(out, v.ID)
		}
	}
	return out
}

// Finish writes the metadata block and the file block (last) and returns
// the layout and summary [Write] returns. Every variable must have been
// added. It does not Sync or Close the file.
func (x *Incremental) Finish() (*Layout, Summary, error) {
	if m := x.Missing(); len(m) > 0 {
		return nil, Summary{}, fmt.Errorf("%w: variables %v not added", ErrInvalid, m)
	}
	if x.done {
		return nil, Summary{}, fmt.Errorf("%w: Finish called twice", ErrInvalid)
	}
	x.done = true
	im, w := x.im, x.w
	var checksum [HashSize]byte
	if !w.o.noHash {
		checksum = fileChecksum(im.chunks)
	}
	mb := im.encodeMeta(w.vars, w.idx, x.lay)
	if _, err := vfd.WriteAtType(w.f, vfd.MemOHdr, mb, im.metaOff); err != nil {
		return nil, Summary{}, vfd.WrapPath(fmt.Errorf("metadata at %d: %w", im.metaOff, err), "write", w.f.Name())
	}
	var flags uint32
	if w.o.noHash {
		flags |= flagUnhashed
	}
	fbb := im.encodeFB(x.meta, x.hb, mb, checksum, flags, len(w.vars), len(x.lay.Blocks))
	if _, err := vfd.WriteAtType(w.f, vfd.MemSuper, fbb[:], im.fs-FBSize); err != nil {
		return nil, Summary{}, vfd.WrapPath(fmt.Errorf("file block at %d: %w", im.fs-FBSize, err), "write", w.f.Name())
	}
	return x.lay, im.summary(w.vars, checksum), nil
}
