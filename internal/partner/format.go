package partner

import (
	"io"

	"github.com/ftigo/ftigo/internal/encode"
)

// Format checks files whose recorded hash is a digest defined by their
// file format, not the BLAKE3 of their bytes ([FileInfo.Format]). levels
// checks FTI-FF data files against their file checksum this way. A
// partner copy is then checked against the block hashes the writer
// computed. That check runs in the one pass that receives the copy, and
// the sender does not hash the file. partner itself knows no format.
type Format interface {
	// Check verifies the file f (its size and f.Hash) reading it once;
	// with image it returns the file's bytes as read. The error is a
	// *CorruptionError naming f and rank, wrapping [ErrHashMismatch] for
	// damage.
	Check(f FileInfo, rank int, image bool) ([]byte, error)
	// Preamble returns what a receiver of f's bytes needs to check them
	// as they arrive. For FTI-FF it is the file's header, metadata and
	// file block. It is read from f, or from f.Image when it is set. rank
	// is the rank holding f, for errors.
	Preamble(f FileInfo, rank int) ([]byte, error)
	// NewChecker returns the check of the bytes of the file received at
	// path (size bytes, the format's digest hash) from the preamble its
	// sender sent. The error is a *CorruptionError wrapping
	// [ErrHashMismatch] when the preamble is damaged or describes
	// another file than size and hash say.
	NewChecker(preamble []byte, path string, rank int, size int64, hash encode.Hash) (Checker, error)
}

// Checker checks a file's bytes shown to Write in order from offset 0;
// Close returns the verdict once they have all been shown (an error
// wrapping [ErrHashMismatch] for damage or a short stream). Write's own
// errors may be ignored: Close reports them.
type Checker interface {
	io.Writer
	Close() error
}
