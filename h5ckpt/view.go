package h5ckpt

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ftigo/ftigo/dataset"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// A rank view is what one old rank needs to read its own variables of a
// checkpoint another reader opened and checked: the file's identity, and
// for each of the rank's variables its record, its slab and its block
// hashes. It lets a restart of N ranks parse and hash the file's tables
// once (on one rank) instead of on every rank. It is a message between
// ranks of one job, never stored. Every number is an unsigned varint:
//
//	viewVersion
//	ckpt id, level, timestamp, ranks, block size, len(run), run
//	tables hash (32 bytes)
//	nvars, per variable (id order): id, dataset+1, type, element size,
//	  size, len(name), name, nd, offset[nd], count[nd], slab,
//	  then the variable's block hashes (32 bytes each)
const viewVersion = 1

// RankView returns the view of old rank rank's variables, for
// [OpenView] on the rank that reads them. Its length is proportional to
// the rank's own variables and blocks, whatever the number of ranks.
func (f *File) RankView(rank int) ([]byte, error) {
	if rank < 0 || rank >= f.meta.Ranks {
		return nil, fmt.Errorf("%w: %s: rank %d of %d", ErrInvalid, f.path, rank, f.meta.Ranks)
	}
	b := []byte{viewVersion}
	m := f.meta
	for _, v := range []int64{m.CkptID, int64(m.Level), m.Timestamp, int64(m.Ranks), int64(m.BlockSize), int64(len(m.Run))} {
		b = binary.AppendUvarint(b, uint64(v))
	}
	b = append(b, m.Run...)
	b = append(b, f.tables[:]...)
	lo, hi := f.rankVars(rank)
	b = binary.AppendUvarint(b, uint64(hi-lo))
	for i := lo; i < hi; i++ {
		v := &f.vars[i]
		for _, x := range []int64{int64(v.id), int64(v.dataset) + 1, int64(v.typ), int64(v.es), v.size, int64(len(v.name))} {
			b = binary.AppendUvarint(b, uint64(x))
		}
		b = append(b, v.name...)
		b = binary.AppendUvarint(b, uint64(len(v.offset)))
		for _, x := range v.offset {
			b = binary.AppendUvarint(b, uint64(x))
		}
		for _, x := range v.count {
			b = binary.AppendUvarint(b, uint64(x))
		}
		b = appendSlab(b, v.slab)
		h0 := v.firstHash * fileformat.HashSize
		b = append(b, f.hashes[h0:h0+numBlocks(v.size, f.bs)*fileformat.HashSize]...)
	}
	return b, nil
}

// rankVars returns the range of f.vars (sorted by rank, then id) that
// rank stored: a binary search, not a scan of every rank's.
func (f *File) rankVars(rank int) (lo, hi int) {
	lo = searchRank(f.vars, rank)
	hi = searchRank(f.vars, rank+1)
	return lo, hi
}

func searchRank(vars []storedVar, rank int) int {
	lo, hi := 0, len(vars)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if vars[m].rank < rank {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// OpenView opens name to read old rank rank's variables as view (made
// by [File.RankView] on a reader that opened name) describes them,
// without reading the file's tables: the work of a rank does not grow
// with the number of ranks that wrote the file. Every block is still
// checked against its hash as it is read ([File.VerifyRank] checks them
// all). The File knows only rank's variables: [File.Decomposition] is
// nil and [File.ReadSlab] refuses. A malformed view gives an error
// wrapping [ErrInvalid].
func OpenView(d vfd.Driver, name string, rank int, view []byte, opts ...Option) (*File, error) {
	cf := &File{path: name, o: buildOptions(opts)}
	if err := cf.decodeView(rank, view); err != nil {
		return nil, fmt.Errorf("%w: %s: view of rank %d: %w", ErrInvalid, name, rank, err)
	}
	f, err := d.Open(name, vfd.ReadOnly)
	if err != nil {
		return nil, fmt.Errorf("h5ckpt: open: %w", err)
	}
	cf.f = f
	return cf, nil
}

func (f *File) decodeView(rank int, b []byte) error {
	if len(b) == 0 || b[0] != viewVersion {
		return errors.New("not a rank view of this version")
	}
	r := &partReader{b: b[1:]}
	bytesOf := func(n int64) []byte {
		if r.err != nil {
			return nil
		}
		if n > int64(len(r.b)) {
			r.err = errors.New("view ends early")
			return nil
		}
		x := r.b[:n]
		r.b = r.b[n:]
		return x
	}
	m := Meta{CkptID: r.num(maxField), Level: int(r.num(1 << 31)), Timestamp: r.num(^uint64(0)), Ranks: int(r.num(1 << 24)), BlockSize: int(r.num(fileformat.MaxBlockSize))}
	m.Run = string(bytesOf(r.num(uint64(len(b)))))
	copy(f.tables[:], bytesOf(32))
	if r.err == nil && (rank < 0 || rank >= m.Ranks || m.BlockSize < fileformat.MinBlockSize) {
		return fmt.Errorf("rank %d of %d, block size %d", rank, m.Ranks, m.BlockSize)
	}
	f.meta, f.bs = m, int64(m.BlockSize)
	nv := r.num(uint64(len(b)))
	for i := int64(0); i < nv && r.err == nil; i++ {
		v := storedVar{varRec: varRec{rank: rank, id: int32(r.num(1<<31 - 1)), dataset: int32(r.num(1<<31)) - 1,
			typ: fileformat.ElemType(r.num(255)), es: uint32(r.num(1<<32 - 1)), size: r.num(maxField)}}
		v.name = string(bytesOf(r.num(uint64(len(b)))))
		nd := r.num(dataset.MaxRank)
		for range nd {
			v.offset = append(v.offset, r.num(maxField))
		}
		for range nd {
			v.count = append(v.count, r.num(maxField))
		}
		v.slab = r.slab()
		if r.err == nil && v.slab.size != v.size {
			r.err = fmt.Errorf("variable %d: slab of %d bytes for %d", v.id, v.slab.size, v.size)
		}
		nb := numBlocks(v.size, f.bs)
		v.firstHash = int64(len(f.hashes) / fileformat.HashSize)
		f.hashes = append(f.hashes, bytesOf(nb*fileformat.HashSize)...)
		if r.err == nil && len(f.vars) > 0 && f.vars[len(f.vars)-1].id >= v.id {
			r.err = fmt.Errorf("variable %d out of order", v.id)
		}
		f.vars = append(f.vars, v)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = errors.New("stray bytes after the view")
	}
	return r.err
}

// SubsetOf returns the subset of a global dataset that variable id of
// old rank rank holds, if it holds one.
func (f *File) SubsetOf(rank int, id int32) (dataset.Subset, bool) {
	v, err := f.find(rank, id)
	if err != nil || v.dataset < 0 {
		return dataset.Subset{}, false
	}
	return dataset.Subset{VarID: v.id, Dataset: v.dataset, Offset: append([]int64(nil), v.offset...), Count: append([]int64(nil), v.count...)}, true
}
