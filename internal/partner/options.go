package partner

import (
	"sync/atomic"

	"go.uber.org/zap"
)

// DefaultBlockSize is the transfer block size when Options.BlockSize is 0.
const DefaultBlockSize = 1 << 20

// TmpSuffix is appended to a rebuilt file's name while it is written; it is
// renamed into place once synced and verified.
//
// wire format: never change — it equals levels.TmpSuffix, which the
// checkpoint runtime removes at start-up.
const TmpSuffix = ".tmp"

// Message tags used by the transfers, all in one range.
// A stream uses its tag for blocks, tag+1 for the header, tag+2 for
// the trailer and tag+3 for the preamble.
const (
	tagCopy        = 0x6600
	tagRestoreOwn  = 0x6610
	tagRestoreHeld = 0x6620
	tagFlags       = 0x6630
)

// Options tune the transfers.
type Options struct {
	// BlockSize is the message size in bytes (FTI's block_size); 0 means
	// DefaultBlockSize.
	BlockSize int
	// Logger receives debug lines; nil means none.
	Logger *zap.Logger
	// Buffers, when not nil, recycles the transfer blocks between calls.
	Buffers *Buffers
	// SkipSourceHash drops the sender's own BLAKE3 pass over the file it
	// sends. The receiver still hashes what it wrote and compares it with
	// the sender's recorded hash, which catches a damaged source as well,
	// only one step later; this saves a hash pass on CPU-starved nodes.
	SkipSourceHash bool
	// KeepCache leaves the partner copies, parity files and re-sent
	// copies a transfer writes in the page cache. By default the writer
	// starts the writeback of every 16 MiB it wrote. It drops each piece
	// from the cache once two more follow it ([vfd.DropCache]). It drops
	// the rest after the final sync. Nobody reads these files unless a
	// node is lost. A writer that reuses its own pages costs a fraction of
	// the kernel time of one that takes fresh memory for every byte (see
	// docs/performance.md). A data file restored from its copy is always
	// kept: the restart reads it next.
	KeepCache bool
	// Format checks the files a receiver learns from their sender
	// ([CopyToPartner]) when the sender says their hash is a digest of
	// the format's ([FileInfo.Format]) rather than their BLAKE3; nil
	// means such a file is refused. The files this rank sends or expects
	// name their format themselves.
	Format Format
	// ImageLimit, when positive, makes [RecoverPartner] and
	// [RebuildGroup] keep the bytes of a data file they restore of at most
	// this size in memory ([L2Recovery.OwnImage], [L3Recovery.DataImage]),
	// verified, for the restart to read.
	ImageLimit int64

	// dropPiece is the piece of dropping behind (0: dropPiece), for tests.
	dropPiece int64
	// hashed, when not nil, counts the bytes the transfers hash with
	// BLAKE3 themselves (senders and receivers), for tests.
	hashed *atomic.Int64
	// imageCopied, when not nil, counts the bytes an L3 rebuild copies
	// into the image of the data file it rebuilds, for tests.
	imageCopied *atomic.Int64
	// copied, when not nil, counts the bytes the transfers copy between
	// an image and their blocks (a sender reading its image into a
	// block, a receiver copying a block into the image it keeps), for
	// tests.
	copied *atomic.Int64
}

// dropPiece is the piece after which a sink that drops behind starts the
// writeback of what it wrote (as the FTI-FF writer does); dropWindow is
// how far behind the write it drops pieces from the page cache, in
// pieces. A sink holds at most (dropWindow+1) pieces of its file in the
// page cache, 48 MiB.
const (
	dropPiece  = 16 << 20
	dropWindow = 2
)

func (o Options) piece() int64 {
	if o.dropPiece > 0 {
		return o.dropPiece
	}
	return dropPiece
}

func (o Options) block() int {
	if o.BlockSize <= 0 {
		return DefaultBlockSize
	}
	return o.BlockSize
}

func (o Options) log() *zap.Logger {
	if o.Logger == nil {
		return zap.NewNop()
	}
	return o.Logger
}
