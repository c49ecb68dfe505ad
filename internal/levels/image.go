package levels

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/vfd"
)

// imageTail is how much of the end of an FTI-FF file is loaded before the
// rest: its metadata and file block, which the verifier reads first, so
// that checking the data overlaps with loading it.
const imageTail = 1 << 20

// imagePiece is the largest read of a restart image: the verifier checks
// the data in segments of about this size (fileformat's segSize) and
// starts on one only once it has arrived whole, so larger reads (the
// transfer size, 16 MiB by default) only delay the first check and leave
// more to hash after the last byte has arrived. The device is kept
// streaming by the read-ahead Engine.Open starts ([Engine.prefetch]),
// whatever the read size.
const imagePiece = 4 << 20

// wantImage reports whether this rank's data entry f is read into memory
// while it is verified ([Env.ImageLimit]): its size is within the limit
// and its digest kind is one verifyImage checks (the FTI-FF checksum or
// the BLAKE3 of the bytes).
func wantImage(env *Env, f File) bool {
	if env.ImageLimit <= 0 || f.Size > env.ImageLimit {
		return false
	}
	return imageKind(f)
}

// imageKind reports whether verifyImage checks f's digest kind.
func imageKind(f File) bool {
	switch f.Attrs[AttrDigest] {
	case "", DigestFTIFF:
		return true
	}
	return false
}

// verifyImage checks the data entry f in s as [VerifyFile] does (the
// same errors) while reading its bytes into memory, each byte read from
// storage once, in reads of at most min(piece, [imagePiece]) bytes, and
// returns the verified bytes. An entry marked
// [AttrInContainer] is read from its task in the L4 container (s is then
// the global area).
func verifyImage(s Store, f File, piece int) ([]byte, error) {
	var (
		file vfd.File
		full string
		err  error
	)
	if f.Attrs[AttrInContainer] != "" {
		cname, _, _ := ContainerPath(f)
		full = s.Path(cname)
		if file, err = OpenTask(s, f); err != nil {
			return nil, err
		}
	} else {
		full = s.Path(f.Name)
		if file, err = openSized(s, f); err != nil {
			return nil, err
		}
	}
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: full, Rank: f.Of, Offset: off, Err: err}
	}
	tail := int64(0)
	ftiff := f.Attrs[AttrDigest] == DigestFTIFF
	if ftiff {
		tail = imageTail
	}
	// The data of an FTI-FF file starts after its header: placed at the
	// start of a page, its pages can be handed over to the variables
	// (fileformat.WithMoveOut) instead of copied.
	piece = min(piece, imagePiece)
	l := vfd.LoadAligned(file, f.Size, piece, tail, fileformat.HeaderSize)
	if ftiff {
		err = verifyFTIFF(l, f, cerr)
	} else {
		var d Digest
		if d, err = hashLoaded(l, f.Size, piece); err != nil {
			err = cerr(0, err)
		} else if d != f.Digest {
			err = cerr(0, fmt.Errorf("%w: got %s, manifest says %s", ErrDigestMismatch, d, f.Digest))
		}
	}
	var img []byte
	if err == nil {
		img, err = l.Bytes()
		if err != nil {
			err = cerr(0, err)
		}
	}
	if cl := l.Close(); err == nil && cl != nil {
		err = cerr(0, cl)
	}
	if err != nil {
		return nil, err
	}
	return img, nil
}

// openSized opens the file of entry f in s and checks its size, with
// [VerifyFile]'s errors.
func openSized(s Store, f File) (vfd.File, error) {
	p := s.Path(f.Name)
	cerr := func(off int64, err error) error { return &CorruptionError{Path: p, Rank: f.Of, Offset: off, Err: err} }
	file, err := s.Driver.Open(p, vfd.ReadOnly)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, cerr(0, ErrMissingFile)
		}
		return nil, cerr(0, fmt.Errorf("%w: %w", ErrMissingFile, err))
	}
	size, err := file.Size()
	if err == nil && size != f.Size {
		err = cerr(size, fmt.Errorf("%w: %d bytes, manifest says %d", ErrSizeMismatch, size, f.Size))
	} else if err != nil {
		err = cerr(0, err)
	}
	if err != nil {
		return nil, errors.Join(err, file.Close())
	}
	return file, nil
}

// hashLoaded returns the BLAKE3 of the size bytes of l, hashing each
// piece of the image in place as soon as it has arrived.
func hashLoaded(l *vfd.Loaded, size int64, piece int) (Digest, error) {
	h := b3.New()
	piece = max(piece, 1<<20)
	for off := int64(0); off < size; {
		n := min(int64(piece), size-off)
		b, err := l.Range(off, off+n)
		if err != nil {
			return Digest{}, err
		}
		h.Write(b)
		off += n
	}
	var d Digest
	copy(d[:], h.Sum(nil))
	return d, nil
}
