package fileformat

import (
	"encoding/binary"

	"github.com/ftigo/ftigo/internal/b3"
)

// Format constants. Every one is part of the file format described in
// docs/format/ftiff.md. Wire format: never change.
const (
	// Version is the format version this package writes and reads.
	Version = 1
	// HashSize is the size of every hash in the file (BLAKE3-256).
	HashSize = 32
	// HeaderSize is the size of the fixed header at offset 0.
	HeaderSize = 64
	// FBSize is the size of the file block, the last bytes of the file.
	FBSize = 192
	// BMDSize is the size of a block metadata record.
	BMDSize = 16
	// VMDSize is the size of a chunk metadata record.
	VMDSize = 88
	// VarRecordSize is the fixed part of a variable record (the name
	// follows, padded to a multiple of 8 bytes).
	VarRecordSize = 24
	// MinBlockSize and MaxBlockSize bound the dCP block size (FTI's
	// dcp_block_size starts at 512 bytes).
	MinBlockSize = 512
	MaxBlockSize = 1 << 30
	// MaxMetaSize is the largest metadata block [Write] produces and [Open]
	// accepts: 256 MiB, the block hashes of 512 GiB of data at the default
	// block size (4 GiB at MinBlockSize). Open refuses a file block that
	// claims more before reading anything, so no file makes the reader
	// allocate what it merely claims. Not part of the format.
	MaxMetaSize = 256 << 20

	// flagUnhashed marks a file written with WithoutHash.
	flagUnhashed = 1 << 0
	knownFlags   = flagUnhashed
)

// Magic numbers. Wire format: never change.
var (
	// headerMagic opens every FTI-FF file (offset 0): a non-ASCII first
	// byte, the name, and a newline that text-mode transfers would mangle.
	headerMagic = [8]byte{0x89, 'F', 'T', 'I', '-', 'F', 'F', '\n'}
	// fbMagic opens the file block at EOF-FBSize.
	fbMagic = [8]byte{'F', 'T', 'I', 'F', 'F', '-', 'F', 'B'}
)

var le = binary.LittleEndian

// header is the fixed 64-byte header at offset 0.
//
//	0  [8]  magic
//	8  u16  version
//	10 u16  header size (64)
//	12 u16  FB size (192)
//	14 u16  reserved (0)
//	16 i64  checkpoint id
//	24 i32  rank
//	28 u8   level
//	29 [35] reserved (0)
type header struct {
	version    uint16
	headerSize uint16
	fbSize     uint16
	ckptID     int64
	rank       int32
	level      uint8
}

func (h *header) encode() [HeaderSize]byte {
	var b [HeaderSize]byte
	copy(b[0:8], headerMagic[:])
	le.PutUint16(b[8:], h.version)
	le.PutUint16(b[10:], h.headerSize)
	le.PutUint16(b[12:], h.fbSize)
	le.PutUint64(b[16:], uint64(h.ckptID))
	le.PutUint32(b[24:], uint32(h.rank))
	b[28] = h.level
	return b
}

func decodeHeader(b []byte) header {
	return header{
		version:    le.Uint16(b[8:]),
		headerSize: le.Uint16(b[10:]),
		fbSize:     le.Uint16(b[12:]),
		ckptID:     int64(le.Uint64(b[16:])),
		rank:       int32(le.Uint32(b[24:])),
		level:      b[28],
	}
}

// fileBlock is the 192-byte file block at EOF-FBSize.
//
//	0   [8]  magic
//	8   u16  version
//	10  u16  FB size (192)
//	12  u32  flags
//	16  u32  dCP block size
//	20  u32  number of variables
//	24  u32  number of blocks
//	28  u32  number of chunks
//	32  i64  ckptSize (variable bytes stored)
//	40  i64  fs (file size)
//	48  i64  maxFs
//	56  i64  ptFs
//	64  i64  timestamp (ns)
//	72  i64  metaOff (offset of the metadata block MB)
//	80  i64  metaSize
//	88  u64  number of dCP block hashes
//	96  [32] metaHash: BLAKE3 of MB
//	128 [32] checksum: BLAKE3 over the chunk hashes in file order
//	160 [32] hash: BLAKE3 of header[0:64] || FB[0:160]
type fileBlock struct {
	version    uint16
	fbSize     uint16
	flags      uint32
	blockSize  uint32
	numVars    uint32
	numBlocks  uint32
	numChunks  uint32
	ckptSize   int64
	fs         int64
	maxFs      int64
	ptFs       int64
	timestamp  int64
	metaOff    int64
	metaSize   int64
	numBHashes uint64
	metaHash   [HashSize]byte
	checksum   [HashSize]byte
	hash       [HashSize]byte
}

const fbHashOff = 160

func (fb *fileBlock) encode() [FBSize]byte {
	var b [FBSize]byte
	copy(b[0:8], fbMagic[:])
	le.PutUint16(b[8:], fb.version)
	le.PutUint16(b[10:], fb.fbSize)
	le.PutUint32(b[12:], fb.flags)
	le.PutUint32(b[16:], fb.blockSize)
	le.PutUint32(b[20:], fb.numVars)
	le.PutUint32(b[24:], fb.numBlocks)
	le.PutUint32(b[28:], fb.numChunks)
	le.PutUint64(b[32:], uint64(fb.ckptSize))
	le.PutUint64(b[40:], uint64(fb.fs))
	le.PutUint64(b[48:], uint64(fb.maxFs))
	le.PutUint64(b[56:], uint64(fb.ptFs))
	le.PutUint64(b[64:], uint64(fb.timestamp))
	le.PutUint64(b[72:], uint64(fb.metaOff))
	le.PutUint64(b[80:], uint64(fb.metaSize))
	le.PutUint64(b[88:], fb.numBHashes)
	copy(b[96:128], fb.metaHash[:])
	copy(b[128:160], fb.checksum[:])
	copy(b[160:192], fb.hash[:])
	return b
}

func decodeFB(b []byte) fileBlock {
	fb := fileBlock{
		version:    le.Uint16(b[8:]),
		fbSize:     le.Uint16(b[10:]),
		flags:      le.Uint32(b[12:]),
		blockSize:  le.Uint32(b[16:]),
		numVars:    le.Uint32(b[20:]),
		numBlocks:  le.Uint32(b[24:]),
		numChunks:  le.Uint32(b[28:]),
		ckptSize:   int64(le.Uint64(b[32:])),
		fs:         int64(le.Uint64(b[40:])),
		maxFs:      int64(le.Uint64(b[48:])),
		ptFs:       int64(le.Uint64(b[56:])),
		timestamp:  int64(le.Uint64(b[64:])),
		metaOff:    int64(le.Uint64(b[72:])),
		metaSize:   int64(le.Uint64(b[80:])),
		numBHashes: le.Uint64(b[88:]),
	}
	copy(fb.metaHash[:], b[96:128])
	copy(fb.checksum[:], b[128:160])
	copy(fb.hash[:], b[160:192])
	return fb
}

// fbHash is the file block's own hash: BLAKE3 over the header and the file
// block up to (not including) the hash field.
func fbHash(hdr, fb []byte) [HashSize]byte {
	h := b3.New()
	_, _ = h.Write(hdr[:HeaderSize])
	_, _ = h.Write(fb[:fbHashOff])
	var out [HashSize]byte
	h.Sum(out[:0])
	return out
}

// varRecordLen is the encoded length of a variable record with a name of n bytes.
func varRecordLen(n int) int64 { return VarRecordSize + int64((n+7)&^7) }

// vmd is a chunk metadata record (88 bytes).
//
//	0  i32  variable id
//	4  u32  idx: index of the variable record
//	8  u32  container id (per variable)
//	12 u8   hascontent (1 if chunksize > 0)
//	13 [3]  reserved (0)
//	16 i64  dptr
//	24 i64  fptr
//	32 i64  chunksize
//	40 i64  containersize
//	48 u64  index of the chunk's first dCP block hash
//	56 [32] chunk hash
type vmd struct {
	id         int32
	idx        uint32
	container  uint32
	hasContent uint8
	dptr       int64
	fptr       int64
	chunkSize  int64
	contSize   int64
	firstBHash uint64
	hash       [HashSize]byte
}

func (v *vmd) put(b []byte) {
	le.PutUint32(b[0:], uint32(v.id))
	le.PutUint32(b[4:], v.idx)
	le.PutUint32(b[8:], v.container)
	b[12] = v.hasContent
	le.PutUint64(b[16:], uint64(v.dptr))
	le.PutUint64(b[24:], uint64(v.fptr))
	le.PutUint64(b[32:], uint64(v.chunkSize))
	le.PutUint64(b[40:], uint64(v.contSize))
	le.PutUint64(b[48:], v.firstBHash)
	copy(b[56:88], v.hash[:])
}

func decodeVMD(b []byte) (v vmd, reservedZero bool) {
	v = vmd{
		id:         int32(le.Uint32(b[0:])),
		idx:        le.Uint32(b[4:]),
		container:  le.Uint32(b[8:]),
		hasContent: b[12],
		dptr:       int64(le.Uint64(b[16:])),
		fptr:       int64(le.Uint64(b[24:])),
		chunkSize:  int64(le.Uint64(b[32:])),
		contSize:   int64(le.Uint64(b[40:])),
		firstBHash: le.Uint64(b[48:]),
	}
	copy(v.hash[:], b[56:88])
	return v, b[13] == 0 && b[14] == 0 && b[15] == 0
}
