package sion

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Format constants of SIONlib fileformat 5, as SIONlib 1.7.6 writes it.
//
// wire format: never change.
const (
	// Magic is the first four bytes of every physical file.
	Magic = "sion"
	// FileFormat is the fileformat version the writers store.
	FileFormat = 5
	// LibVersion and LibPatch are the library version fields the writers
	// store (1000*major+minor and patch level of SIONlib 1.7.6), so files
	// compare byte for byte with the C library's.
	LibVersion = 1007
	LibPatch   = 6
	// PrefixLen is the size of the NUL-padded file name prefix field.
	PrefixLen = 1024
	// meta1Fixed is the size of META1 before the per-task arrays.
	meta1Fixed = 1076
	// KeyValNone .. KeyValUnknown are the key-value modes kept in the upper
	// 32 bits of flag1.
	KeyValNone    = 50
	KeyValInline  = 51
	KeyValMeta    = 52
	KeyValHash    = 53
	KeyValUnknown = 54
	// recordHeader is the size of a key-value record header: i64 key, i64 length.
	recordHeader = 16
	// DefaultFSBlkSize is the alignment the writers use when none is given
	// (the st_blksize SIONlib finds on common Linux file systems).
	DefaultFSBlkSize = 4096
	// setSuffixFormat names file k >= 1 of a multi-file set: name + ".%06d".
	setSuffixFormat = "%s.%06d"
)

// Limits of this package's readers and writers; not part of the format.
// A reader refuses a file beyond them with [ErrTooLarge] before
// allocating anything of that size, so a damaged or forged count never
// costs more than the limit; the writers refuse to make such a file.
const (
	// MaxTasks is the largest task count of a physical file or a set:
	// 2,097,152, above the largest SIONlib runs reported (1.8 million
	// tasks on JUQUEEN). A reader holds about 150 bytes per task.
	MaxTasks = 1 << 21
	// MaxMeta2Size is the largest META2 (block counts and block sizes,
	// 8 bytes per task and block) a reader accepts: 512 MiB.
	MaxMeta2Size = 512 << 20
	// MaxRecords is the most key-value records [Reader.Records] returns
	// for one task; [Reader.EachRecord] streams any number.
	MaxRecords = 1 << 20
)

// Field offsets in META1.
//
// wire format: never change.
const (
	offMagic      = 0
	offEndian     = 4
	offVersion    = 8
	offPatch      = 12
	offFileFormat = 16
	offFSBlkSize  = 20
	offNTasks     = 24
	offNFiles     = 28
	offFileNumber = 32
	offFlag1      = 36
	offFlag2      = 44
	offPrefix     = 52
)

// Meta1Size returns the size of META1 for n tasks: 1088 + 16n.
func Meta1Size(n int) int64 { return meta1Fixed + 16*int64(n) + 12 }

// SetMemberName returns the name of physical file k of the set whose file 0
// is name: name itself for k == 0, name + ".%06d" otherwise.
func SetMemberName(name string, k int) string {
	if k == 0 {
		return name
	}
	return fmt.Sprintf(setSuffixFormat, name, k)
}

// roundUp rounds v up to a multiple of m (m > 0).
func roundUp(v, m int64) int64 {
	if m <= 0 {
		return v
	}
	r := v % m
	if r == 0 {
		return v
	}
	return v + m - r
}

// mulAdd returns a + b*c and false on overflow or negative operands.
func mulAdd(a, b, c int64) (int64, bool) {
	if a < 0 || b < 0 || c < 0 {
		return 0, false
	}
	if b != 0 && c > (math.MaxInt64-a)/b {
		return 0, false
	}
	return a + b*c, true
}

// header is META1 of one physical file in host form.
type header struct {
	BigEndian    bool // metadata byte order
	DataBigEnd   bool // declared user-data byte order (informational)
	Version      int32
	Patch        int32
	FileFormat   int32
	FSBlkSize    int32
	NTasks       int32
	NFiles       int32
	FileNumber   int32
	Flag1        int64
	Flag2        int64
	Prefix       string
	GlobalRanks  []int64
	ChunkSizes   []int64 // as stored
	MaxChunks    int32
	StartOfMeta2 int64
}

func byteOrder(big bool) binary.ByteOrder {
	if big {
		return binary.BigEndian
	}
	return binary.LittleEndian
}

// endianWord returns the four bytes [M, D, D, M].
func endianWord(metaBig, dataBig bool) [4]byte {
	var m, d byte
	if metaBig {
		m = 1
	}
	if dataBig {
		d = 1
	}
	return [4]byte{m, d, d, m}
}

// encodeMeta1 returns META1 of h; when withTail is false the last 12 bytes
// (maxchunks, start_of_varheader) are zero, as in a file still being written.
func encodeMeta1(h *header, withTail bool) []byte {
	n := len(h.ChunkSizes)
	bo := byteOrder(h.BigEndian)
	b := make([]byte, Meta1Size(n))
	copy(b[offMagic:], Magic)
	ew := endianWord(h.BigEndian, h.DataBigEnd)
	copy(b[offEndian:], ew[:])
	bo.PutUint32(b[offVersion:], uint32(h.Version))
	bo.PutUint32(b[offPatch:], uint32(h.Patch))
	bo.PutUint32(b[offFileFormat:], uint32(h.FileFormat))
	bo.PutUint32(b[offFSBlkSize:], uint32(h.FSBlkSize))
	bo.PutUint32(b[offNTasks:], uint32(n))
	bo.PutUint32(b[offNFiles:], uint32(h.NFiles))
	bo.PutUint32(b[offFileNumber:], uint32(h.FileNumber))
	bo.PutUint64(b[offFlag1:], uint64(h.Flag1))
	bo.PutUint64(b[offFlag2:], uint64(h.Flag2))
	copy(b[offPrefix:offPrefix+PrefixLen-1], h.Prefix)
	for i := 0; i < n; i++ {
		bo.PutUint64(b[meta1Fixed+8*i:], uint64(h.GlobalRanks[i]))
		bo.PutUint64(b[meta1Fixed+8*n+8*i:], uint64(h.ChunkSizes[i]))
	}
	if withTail {
		copy(b[meta1Fixed+16*n:], encodeTail(h))
	}
	return b
}

// encodeTail returns the last 12 bytes of META1: maxchunks, start_of_varheader.
func encodeTail(h *header) []byte {
	bo := byteOrder(h.BigEndian)
	t := make([]byte, 12)
	bo.PutUint32(t[0:], uint32(h.MaxChunks))
	bo.PutUint64(t[4:], uint64(h.StartOfMeta2))
	return t
}

// tailOffset returns the offset of maxchunks in META1 for n tasks.
func tailOffset(n int) int64 { return meta1Fixed + 16*int64(n) }

// trailer says what follows the blocksizes in META2.
type trailer int

const (
	trailerNone    trailer = iota // sion_paropen_mpi, single file
	trailerEmpty                  // serial writer: i32 0
	trailerMapping                // i32 N + N (filenr, lrank) pairs
)

// MapEntry is one entry of a multi-file set's mapping: where the task with
// a given global rank lives.
type MapEntry struct {
	File      int32 // physical file number
	LocalRank int32 // task index inside that file
}

// encodeMeta2 returns META2: blockcount[n], blocksize[maxchunks][n]
// block-major (0 for unused entries), then the trailer.
func encodeMeta2(bigEndian bool, blockSizes [][]int64, maxChunks int, tr trailer, mapping []MapEntry) []byte {
	n := len(blockSizes)
	bo := byteOrder(bigEndian)
	size := 8*n + 8*n*maxChunks
	switch tr {
	case trailerEmpty:
		size += 4
	case trailerMapping:
		size += 4 + 8*len(mapping)
	}
	b := make([]byte, size)
	for i, bs := range blockSizes {
		c := len(bs)
		if c == 0 {
			c = 1 // the C writers record at least one (empty) block
		}
		bo.PutUint64(b[8*i:], uint64(c))
		for k, s := range bs {
			bo.PutUint64(b[8*n+8*(k*n+i):], uint64(s))
		}
	}
	p := 8*n + 8*n*maxChunks
	switch tr {
	case trailerEmpty:
		bo.PutUint32(b[p:], 0)
	case trailerMapping:
		bo.PutUint32(b[p:], uint32(len(mapping)))
		for g, m := range mapping {
			bo.PutUint32(b[p+4+8*g:], uint32(m.File))
			bo.PutUint32(b[p+8+8*g:], uint32(m.LocalRank))
		}
	}
	return b
}
