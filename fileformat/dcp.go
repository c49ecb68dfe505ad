package fileformat

import "fmt"

// Plan returns the layout and the file size Write would use for vars
// after prev, without writing anything: what a level needs before writing
// to agree on the group's largest file (Meta.MaxFs) or to reserve space.
// For compressed variables the size is an upper bound: the file's size
// with every block stored raw (lossy variables at their stored size).
// It takes the same options as Write (the block size changes the size of
// the block hash table).
func Plan(vars []Var, prev *Layout, opts ...Option) (*Layout, int64, error) {
	o := buildOptions(opts)
	if o.blockSize < MinBlockSize || o.blockSize > MaxBlockSize {
		return nil, 0, fmt.Errorf("%w: block size %d outside [%d, %d]", ErrInvalid, o.blockSize, MinBlockSize, MaxBlockSize)
	}
	idx, err := checkVars(vars)
	if err != nil {
		return nil, 0, err
	}
	ext, err := buildExt(&o, vars, idx)
	if err != nil {
		return nil, 0, err
	}
	vars, _ = storeVars(vars)
	lay, err := plan(vars, prev)
	if err != nil {
		return nil, 0, err
	}
	var nbh uint64
	data, meta := int64(0), int64(len(ext))
	for _, b := range lay.Blocks {
		meta += BMDSize
		for _, c := range b.Containers {
			n := min(max(int64(len(vars[idx[c.VarID]].Data))-c.Dptr, 0), c.Size)
			data += c.Size
			meta += VMDSize + numBlocks(n, o.blockSize)*HashSize
			nbh += uint64(numBlocks(n, o.blockSize))
		}
	}
	for i := range vars {
		meta += varRecordLen(len(vars[i].Name))
	}
	if codecVersion(vars) {
		meta += codecTablesSize(nbh, len(vars))
	}
	if err := checkMetaSize(meta, o.blockSize); err != nil {
		return nil, 0, err
	}
	return lay, HeaderSize + data + meta + FBSize, nil
}

// HashBlocks returns the dCP block hashes of data for the given block
// size, exactly as Write stores them for a chunk holding data. A later
// differential checkpoint compares them with [ChunkInfo.BlockHashes] of
// the previous file (see [DirtyBlocks]) to rewrite only changed blocks.
func HashBlocks(data []byte, blockSize int, opts ...Option) ([][HashSize]byte, error) {
	if blockSize < MinBlockSize || blockSize > MaxBlockSize {
		return nil, fmt.Errorf("%w: block size %d outside [%d, %d]", ErrInvalid, blockSize, MinBlockSize, MaxBlockSize)
	}
	o := buildOptions(opts)
	out := make([][HashSize]byte, numBlocks(int64(len(data)), uint32(blockSize)))
	hashBlocks(data, uint32(blockSize), out, o.workers)
	return out, nil
}

// DirtyBlocks returns, in increasing order, the indices of the blocks of
// cur whose hash differs from old's (blocks past the end of old are dirty).
func DirtyBlocks(old, cur [][HashSize]byte) []int {
	var d []int
	for i := range cur {
		if i >= len(old) || old[i] != cur[i] {
			d = append(d, i)
		}
	}
	return d
}

// ChunkHash returns the chunk hash of a chunk of size bytes from its block
// hashes (see docs/format/ftiff.md), so a dCP writer that rehashed only
// some blocks can rebuild the chunk hash without rereading the rest.
func ChunkHash(size int64, blockSize int, blocks [][HashSize]byte) [HashSize]byte {
	return chunkHash(size, uint32(blockSize), blocks)
}
