package fileformat

import (
	"fmt"
	"runtime"
	"time"

	"go.uber.org/zap"
)

// ElemType is the element type of a protected variable. The numeric values
// are stored in files. Wire format: never change.
type ElemType uint8

// The element types. Bytes is opaque data (element size 1); Struct is a
// composite element whose size the caller gives in [Var.ElemSize].
// Wire format: never change these values.
const (
	Bytes      ElemType = 0
	Int8       ElemType = 1
	Int16      ElemType = 2
	Int32      ElemType = 3
	Int64      ElemType = 4
	Uint8      ElemType = 5
	Uint16     ElemType = 6
	Uint32     ElemType = 7
	Uint64     ElemType = 8
	Float32    ElemType = 9
	Float64    ElemType = 10
	Complex64  ElemType = 11
	Complex128 ElemType = 12
	Struct     ElemType = 13

	numElemTypes ElemType = 14
)

var elemTypeInfo = [numElemTypes]struct {
	name string
	size uint32
}{
	{"bytes", 1}, {"int8", 1}, {"int16", 2}, {"int32", 4}, {"int64", 8},
	{"uint8", 1}, {"uint16", 2}, {"uint32", 4}, {"uint64", 8},
	{"float32", 4}, {"float64", 8}, {"complex64", 8}, {"complex128", 16},
	{"struct", 0},
}

// String returns the lowercase name of t ("float64").
func (t ElemType) String() string {
	if t < numElemTypes {
		return elemTypeInfo[t].name
	}
	return fmt.Sprintf("elemtype(%d)", uint8(t))
}

// Size returns the natural element size of t in bytes, or 0 for Struct
// (whose size is per variable) and for unknown types.
func (t ElemType) Size() uint32 {
	if t < numElemTypes {
		return elemTypeInfo[t].size
	}
	return 0
}

// Valid reports whether t is a known element type.
func (t ElemType) Valid() bool { return t < numElemTypes }

// elemSize resolves the element size of a variable: the natural size for
// fixed types (es must be 0 or equal to it), es itself for Struct (> 0).
func elemSize(t ElemType, es uint32) (uint32, bool) {
	if !t.Valid() {
		return 0, false
	}
	if t == Struct {
		return es, es > 0
	}
	n := t.Size()
	return n, es == 0 || es == n
}

// Var describes one protected variable for [Write]. Data is a view of the
// application's memory (for typed slices, unsafe.Slice over the backing
// array); the writer reads it in place and never copies it whole. Data must
// not change while Write runs.
type Var struct {
	// ID identifies the variable across checkpoints; it must be >= 0 and
	// unique within one write.
	ID int32
	// Name is an optional label stored with the variable (at most 65535 bytes).
	Name string
	// Type is the element type.
	Type ElemType
	// ElemSize is the element size in bytes: 0 (or the natural size) for
	// fixed types, required for Struct.
	ElemSize uint32
	// Data is the variable's bytes; its length must be a multiple of the
	// element size.
	Data []byte
	// Codec compresses the variable's blocks losslessly ([CodecZstd]);
	// the zero value stores them as they are.
	Codec Codec
	// Lossy reduces a floating-point variable's precision before it is
	// stored; the zero value ([Exact]) keeps every bit. Never a default.
	Lossy Lossy
}

// Meta is the per-file metadata: who wrote the file and when.
type Meta struct {
	// CkptID is the checkpoint id.
	CkptID int64
	// Rank is the writing rank (>= 0).
	Rank int32
	// Level is the checkpoint level (1..4, 0 if not known).
	Level uint8
	// Timestamp is the creation time in ns since the Unix epoch. Write
	// fills it from its clock (see [WithClock]) when it is 0.
	Timestamp int64
	// MaxFs is the largest file size in the rank's group (FTI's maxFs,
	// used by L3 padding); 0 when unknown.
	MaxFs int64
	// PtFs is the size of the partner's file (FTI's ptFs, used by L2);
	// 0 when unknown.
	PtFs int64
}

// VarInfo describes a variable stored in a file, as [Reader.Vars] lists it.
type VarInfo struct {
	ID       int32
	Name     string
	Type     ElemType
	ElemSize uint32
	// Count is the number of elements (Size / ElemSize).
	Count int64
	// Size is the stored size in bytes (FTI's GetStoredSize).
	Size int64
	// Chunks is the number of fragments (containers) the variable uses.
	Chunks int
	// Codec is the lossless compression the writer applied to its blocks.
	Codec Codec
	// Lossy is the lossy mode its values were stored with ([Exact] for
	// none), and Bound the largest error that introduced.
	Lossy Lossy
	Bound ErrorBound
	// Stored is the number of bytes its chunks take in the file's data
	// area (compressed blocks at their compressed size).
	Stored int64
}

// Exact reports whether the variable restores bit for bit.
func (v VarInfo) Exact() bool { return v.Lossy.Mode == Exact }

// ChunkInfo describes one chunk (VMD record) of a file, in file order.
type ChunkInfo struct {
	VarID int32
	// Block is the index of the data block the container belongs to.
	Block int
	// Container is the container's id within its variable.
	Container uint32
	// Dptr is the chunk's offset in the variable's data.
	Dptr int64
	// Fptr is the chunk's offset in the file.
	Fptr int64
	// Size is the number of valid bytes in the container (FTI's chunksize).
	Size int64
	// ContainerSize is the space reserved in the file for the container.
	ContainerSize int64
	// Hash is the chunk's BLAKE3 hash (see docs/format/ftiff.md).
	Hash [HashSize]byte
	// BlockHashes are the BLAKE3 hashes of the chunk's dCP blocks.
	BlockHashes [][HashSize]byte
	// Compressed is set for a chunk of a compressed variable: its blocks
	// are stored back to back at their Stored sizes (a block stored at its
	// own length is raw, a shorter one a zstd frame), StoredSize bytes in
	// all, with no empty tail. Otherwise the container takes
	// ContainerSize bytes and Stored is nil.
	Compressed bool
	Stored     []uint32
	StoredSize int64
}

// extent is the number of bytes the container takes in the file.
func (c *ChunkInfo) extent() int64 {
	if c.Compressed {
		return c.StoredSize
	}
	return c.ContainerSize
}

// storedLen is the stored length of block j.
func (c *ChunkInfo) storedLen(j int, bs uint32) int64 {
	if c.Compressed {
		return int64(c.Stored[j])
	}
	return blockLen(c.Size, bs, j)
}

// Summary describes a written file: what a level puts in its manifest.
type Summary struct {
	// FileSize is the size of the whole file in bytes (FTI's fs).
	FileSize int64
	// DataSize is the number of variable bytes stored (FTI's ckptSize).
	DataSize int64
	// Checksum is the file checksum: BLAKE3 over the chunk hashes in file order.
	Checksum [HashSize]byte
	// BlockSize is the dCP block size the block hashes were computed with.
	BlockSize uint32
	// Chunks lists every chunk in file order.
	Chunks []ChunkInfo
	// Logical is the number of bytes of the variables as the program
	// holds them (DataSize counts lossy variables at their stored
	// precision); Stored is the number of bytes the chunks take in the
	// data area, compressed blocks at their compressed size. Their ratio
	// is the compression ratio.
	Logical, Stored int64
}

// Ratio is the compression ratio Logical / Stored (1 for an empty file).
func (s Summary) Ratio() float64 {
	if s.Stored == 0 {
		return 1
	}
	return float64(s.Logical) / float64(s.Stored)
}

// Option configures [Write] and [Open].
type Option func(*options)

type options struct {
	blockSize uint32
	noHash    bool
	noDigest  bool
	sync      bool
	verified  bool
	moveOut   bool
	workers   int
	clock     func() time.Time
	logger    *zap.Logger
	// datasets and subsets are recorded by WithDatasets.
	datasets []Dataset
	subsets  []Subset
}

// DefaultBlockSize is the default dCP block size: the granularity of block
// hashes and of parallel hashing.
const DefaultBlockSize = 64 << 10

func buildOptions(opts []Option) options {
	o := options{
		blockSize: DefaultBlockSize,
		workers:   runtime.GOMAXPROCS(0),
		clock:     time.Now,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.workers < 1 {
		o.workers = 1
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	if o.logger == nil {
		o.logger = zap.NewNop()
	}
	return o
}

// WithBlockSize sets the dCP block size in bytes: each chunk is hashed in
// blocks of this size, and the block hashes are stored so a later write can
// tell which blocks changed. It must lie in [MinBlockSize, MaxBlockSize].
// Only Write uses it; a Reader takes the size from the file.
func WithBlockSize(n int) Option {
	return func(o *options) {
		if n < 0 || int64(n) > MaxBlockSize {
			o.blockSize = 0
			return
		}
		o.blockSize = uint32(n)
	}
}

// WithoutFileDigest makes [WriteDelta] and [DeltaPlan.Write] skip the
// BLAKE3 of the whole delta file (DeltaStats.Digest is then zero): for a
// caller that has the bytes hashed anyway as they are read back (an L2
// or L3 transfer records the digest it computes). Block hashes are
// unaffected.
func WithoutFileDigest() Option { return func(o *options) { o.noDigest = true } }

// WithoutHash makes Write skip chunk and block hashing (they are stored as
// zeros and the file block's flag says so). The file block and metadata
// hashes are still written. Meant for benchmarks: a Reader restores such a
// file without verifying the data, and Verify refuses it with ErrUnhashed.
func WithoutHash() Option { return func(o *options) { o.noHash = true } }

// WithSync makes Write durable: after writing the data it syncs it while
// the hashing (which runs alongside the writes) finishes, so the device's
// flush time hides the hashing time; then it writes the metadata and the
// file block and syncs again. The file block is thus never durable before
// the data it describes. Without it Write leaves syncing to the caller.
func WithSync() Option { return func(o *options) { o.sync = true } }

// WithVerifiedData tells [Open] that every byte of the file's data was
// checked already and cannot have changed since: an in-memory image whose
// every block (or whose whole-file digest) was verified as it was read in.
// [Reader.ReadVar] and [Reader.ReadVarAt] then copy the data without
// hashing it again. Open still checks the header, the file block, the
// metadata hash and the structure, and [Reader.Verify] still checks
// everything. Never use it on a file that lives on storage: bytes there
// can change between the check and the read.
func WithVerifiedData() Option { return func(o *options) { o.verified = true } }

// WithMoveOut lets [Reader.ReadVar] hand a chunk's bytes over to the
// destination instead of copying them, when the file is an image in
// memory that lends its bytes (vfd.BytesFile) and was verified
// ([WithVerifiedData]): the whole memory pages of the chunk that line up
// with the destination's are moved ([vfd.MovePages]), the rest copied.
// The caller gives the image away: a chunk can then be read once, a
// second read (ReadVar, ReadVarAt) fails with [ErrMovedOut], and nothing
// else may read the image's bytes. Without WithVerifiedData, or for a
// file that does not lend its bytes, it does nothing. Reads of different
// variables may still run concurrently, reads of the same one may not.
func WithMoveOut() Option { return func(o *options) { o.moveOut = true } }

// WithHashWorkers sets how many goroutines hash in parallel (default
// GOMAXPROCS).
func WithHashWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithClock sets the clock Write uses for Meta.Timestamp when it is 0.
func WithClock(now func() time.Time) Option { return func(o *options) { o.clock = now } }

// WithLogger sets the logger (nil means no logging).
func WithLogger(l *zap.Logger) Option { return func(o *options) { o.logger = l } }
