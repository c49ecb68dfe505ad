package partner

import (
	"errors"
	"fmt"
	"io"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// Ref names a file through a driver.
type Ref struct {
	Driver vfd.Driver
	Path   string
}

// FileInfo is a file with its expected size and BLAKE3-256 hash.
type FileInfo struct {
	Ref
	Size int64
	Hash encode.Hash
	// HashUnknown says Hash is not known yet. A checkpoint transfer
	// ([CopyToPartner], [EncodeGroup]) then computes it from the bytes it
	// reads and returns it, for the caller to record. The receivers check
	// what they got against that hash instead. It saves the caller a pass
	// over a file the transfer reads anyway.
	HashUnknown bool
	// Checked says the caller has already checked the file against Size
	// and Hash (with [FileInfo.CheckImage]). CheckErr is the outcome. A
	// recovery ([RecoverPartner], [RebuildGroup]) then does not read the
	// file again to check it.
	Checked  bool
	CheckErr error
	// Image, when not nil, holds the file's bytes, verified: a recovery
	// that sends the file reads them from memory.
	Image []byte
	// Tap, when not nil, is shown every byte of the file, in order. A
	// checkpoint transfer ([CopyToPartner], [EncodeGroup]) shows them as
	// it reads the file to send or encode it. So the caller checks the
	// file in the transfer's own read pass. levels verifies an FTI-FF file
	// this way when it raises a checkpoint. The transfer ignores the tap's
	// errors: the caller asks the tap for its verdict afterwards. A tap
	// that did not see the whole file saw a transfer that failed.
	Tap io.Writer
	// Format, when not nil, says Hash is the format's digest of the file,
	// not the BLAKE3 of its bytes (levels: the FTI-FF file checksum). The
	// file is then checked by the format ([FileInfo.Check]). A transfer
	// sends the format's preamble of it ahead of its bytes. The receiver
	// checks the bytes against it as they arrive. The transfer does not
	// hash the file otherwise. HashUnknown does not apply.
	Format Format
	// Preamble, when not nil, is the preamble of the file the caller has
	// read already (else a transfer asks Format for it).
	Preamble []byte
}

// Valid reports whether the ref names a file.
func (r Ref) Valid() bool { return r.Driver != nil && r.Path != "" }

// imageAlign is the offset of a data file's image that starts a memory
// page. It is the end of the FTI-FF header (fileformat.HeaderSize), where
// the variables' data starts. So the restart can hand the image's pages
// over to the variables (vfd.MovePages) instead of copying them.
const imageAlign = 64

// checkPiece is the smallest read of a check: large reads, read ahead
// while the previous piece is hashed, keep a device busy.
const checkPiece = 4 << 20

// present reports whether f names a regular file of its recorded size
// (without reading it).
func (f FileInfo) present() bool {
	if !f.Valid() {
		return false
	}
	file, err := f.Driver.Open(f.Path, vfd.ReadOnly)
	if err != nil {
		return false
	}
	size, err := file.Size()
	return errors.Join(err, file.Close()) == nil && size == f.Size
}

// Check verifies that f exists with its size and hash. The error is a
// *CorruptionError naming the path and rank.
func (f FileInfo) Check(rank int, blockSize int) error {
	if f.Format != nil {
		_, err := f.Format.Check(f, rank, false)
		return err
	}
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: f.Path, Rank: rank, Offset: off, Err: err}
	}
	file, err := f.Driver.Open(f.Path, vfd.ReadOnly)
	if err != nil {
		return cerr(0, err)
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return cerr(0, err)
	}
	if size != f.Size {
		return cerr(size, fmt.Errorf("%w: %d bytes, want %d", ErrHashMismatch, size, f.Size))
	}
	h, err := encode.HashReader(file, size, max(blockSize, checkPiece))
	if err != nil {
		return cerr(0, err)
	}
	if h != f.Hash {
		return cerr(0, fmt.Errorf("%w: BLAKE3 %x, want %x", ErrHashMismatch, h[:8], f.Hash[:8]))
	}
	return nil
}

// CheckImage checks f as [FileInfo.Check] does (the same errors) while
// reading its bytes into memory, each read from storage once, and
// returns them.
func (f FileInfo) CheckImage(rank int, blockSize int) ([]byte, error) {
	if f.Format != nil {
		return f.Format.Check(f, rank, true)
	}
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: f.Path, Rank: rank, Offset: off, Err: err}
	}
	file, err := f.Driver.Open(f.Path, vfd.ReadOnly)
	if err != nil {
		return nil, cerr(0, err)
	}
	size, err := file.Size()
	if err == nil && size != f.Size {
		err = cerr(size, fmt.Errorf("%w: %d bytes, want %d", ErrHashMismatch, size, f.Size))
	} else if err != nil {
		err = cerr(0, err)
	}
	if err != nil {
		return nil, errors.Join(err, file.Close())
	}
	piece := int64(max(blockSize, 4<<20))
	l := vfd.LoadAligned(file, size, int(piece), 0, imageAlign)
	h := b3.New()
	for off := int64(0); off < size && err == nil; off += piece {
		var b []byte
		if b, err = l.Range(off, min(off+piece, size)); err == nil {
			h.Write(b)
		}
	}
	var img []byte
	if err == nil {
		img, err = l.Bytes()
	}
	err = errors.Join(err, l.Close())
	if err != nil {
		return nil, cerr(0, err)
	}
	if got := encode.Hash(h.Sum(nil)); got != f.Hash {
		return nil, cerr(0, fmt.Errorf("%w: BLAKE3 %x, want %x", ErrHashMismatch, got[:8], f.Hash[:8]))
	}
	return img, nil
}

// check returns the outcome of the caller's check when there was one
// (Checked), else checks f.
func (f FileInfo) check(rank int, blockSize int) error {
	if f.Checked {
		return f.CheckErr
	}
	return f.Check(rank, blockSize)
}

// open opens f for reading: its verified image when it has one.
func (f FileInfo) open() (vfd.File, error) {
	if f.Image != nil {
		return vfd.BytesFile(f.Path, f.Image), nil
	}
	return f.Driver.Open(f.Path, vfd.ReadOnly)
}
