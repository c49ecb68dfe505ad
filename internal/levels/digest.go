package levels

import (
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// FileDigest returns the BLAKE3-256 of every byte of f. It is the default
// [Env.Digest].
func FileDigest(f vfd.File) (Digest, error) {
	size, err := f.Size()
	if err != nil {
		return Digest{}, err
	}
	// Read ahead in 4 MiB pieces while hashing (encode.HashReader).
	d, err := encode.HashReader(f, size, 4<<20)
	if err != nil {
		return Digest{}, vfd.WrapPath(err, "read", f.Name())
	}
	return Digest(d), nil
}

// HashingWriter wraps a File and hashes what is written to it, provided
// writes are sequential from offset 0 (it reports whether they were).
type HashingWriter struct {
	vfd.File
	h          *b3.Hasher
	next       int64
	sequential bool
}

// NewHashingWriter returns a File wrapper that hashes sequential writes.
func NewHashingWriter(f vfd.File) *HashingWriter {
	return &HashingWriter{File: f, h: b3.New(), sequential: true}
}

// WriteAt writes through and hashes p when it continues the previous write.
func (w *HashingWriter) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	if off != w.next {
		w.sequential = false
	}
	if w.sequential {
		w.h.Write(p[:n])
		w.next += int64(n)
	}
	return n, err
}

// Unwrap returns the wrapped file.
func (w *HashingWriter) Unwrap() vfd.File { return w.File }

// Sum returns the digest of everything written and true, or false when
// the writes were not sequential (then the caller must re-read the file).
func (w *HashingWriter) Sum() (Digest, bool) {
	var d Digest
	copy(d[:], w.h.Sum(nil))
	return d, w.sequential
}
