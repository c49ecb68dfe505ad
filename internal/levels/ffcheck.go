package levels

import (
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// ftiffFormat is the [partner.Format] of the files whose entries record
// their FTI-FF file checksum ([DigestFTIFF]): a partner transfer sends
// the file's preamble (header, metadata, file block) ahead of its bytes
// and the receiver verifies them as they arrive against the block hashes
// the writer computed ([fileformat.Verifier]), so that nobody hashes the
// whole file; a file at rest is checked as [VerifyFile] checks it.
type ftiffFormat struct {
	// piece is the read size of a check into memory.
	piece int
}

// entry returns f as a manifest entry in its directory's store.
func (ftiffFormat) entry(f partner.FileInfo, rank int) (Store, File) {
	s := Store{Driver: f.Driver, Dir: path.Dir(f.Path)}
	return s, File{Name: path.Base(f.Path), Size: f.Size, Digest: Digest(f.Hash), Of: rank,
		Attrs: map[string]string{AttrDigest: DigestFTIFF}}
}

// Check verifies f as VerifyFile verifies an FTI-FF entry (every block
// hash, the structure, the checksum against f.Hash), into memory with
// image; a file with an Image is checked there, not read.
func (x ftiffFormat) Check(f partner.FileInfo, rank int, image bool) ([]byte, error) {
	s, e := x.entry(f, rank)
	var img []byte
	var err error
	switch {
	case f.Image != nil:
		cerr := func(off int64, err error) error {
			return &CorruptionError{Path: f.Path, Rank: rank, Offset: off, Err: err}
		}
		if int64(len(f.Image)) != f.Size {
			err = cerr(int64(len(f.Image)), fmt.Errorf("%w: %d bytes, manifest says %d", ErrSizeMismatch, len(f.Image), f.Size))
		} else {
			err = verifyFTIFF(vfd.BytesFile(f.Path, f.Image), e, cerr) // verified in place (its Range)
		}
		img = f.Image
	case image:
		img, err = verifyImage(s, e, max(x.piece, 4<<20))
	default:
		err = VerifyFile(s, e)
	}
	if err != nil {
		return nil, partnerError(f.Path, rank, err)
	}
	return img, nil
}

// partnerError is a levels check error as partner reports it: a
// *partner.CorruptionError, wrapping partner.ErrHashMismatch for a file
// of another size or content.
func partnerError(p string, rank int, err error) error {
	var ce *CorruptionError
	off := int64(0)
	if errors.As(err, &ce) && ce.Path == p {
		off, err = ce.Offset, ce.Err // named by the partner error
	}
	switch {
	case errors.Is(err, ErrMissingFile):
		err = fmt.Errorf("%w: %w", fs.ErrNotExist, err)
	case errors.Is(err, ErrDigestMismatch) || errors.Is(err, ErrSizeMismatch):
		err = fmt.Errorf("%w: %w", partner.ErrHashMismatch, err)
	}
	return &partner.CorruptionError{Path: p, Rank: rank, Offset: off, Err: err}
}

// Preamble reads the preamble of f (from f.Image when it has one),
// whose file checksum must be f.Hash: the sender finds a file whose
// metadata changed, the receiver any other damage.
func (x ftiffFormat) Preamble(f partner.FileInfo, rank int) ([]byte, error) {
	var file vfd.File
	if f.Image != nil {
		file = vfd.BytesFile(f.Path, f.Image)
	} else {
		s, e := x.entry(f, rank)
		var err error
		if file, err = openSized(s, e); err != nil {
			return nil, partnerError(f.Path, rank, err)
		}
	}
	defer file.Close()
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: f.Path, Rank: rank, Offset: off, Err: err}
	}
	var pre []byte
	err := readFTIFF(file, Digest(f.Hash), cerr, func(rd *fileformat.Reader) (err error) {
		pre, err = rd.Preamble()
		return err
	})
	if err != nil {
		return nil, partnerError(f.Path, rank, err)
	}
	return pre, nil
}

// readFTIFF opens the FTI-FF file in file, lets use read what its caller
// needs from it, and checks that the file's checksum is want: a file
// whose metadata changed since its entry was recorded is refused.
// Errors are corruption errors made by cerr.
func readFTIFF(file vfd.File, want Digest, cerr func(int64, error) error, use func(*fileformat.Reader) error) error {
	rd, err := fileformat.Open(file)
	if err == nil {
		err = use(rd)
	}
	if err != nil {
		return ftiffError(err, cerr)
	}
	if d := Digest(rd.Summary().Checksum); d != want {
		return cerr(0, fmt.Errorf("%w: FTI-FF checksum %s, manifest says %s", ErrDigestMismatch, d, want))
	}
	return nil
}

// NewChecker builds the Verifier of the file received at p from its
// sender's preamble, whose file checksum must be hash and size its size.
func (ftiffFormat) NewChecker(preamble []byte, p string, rank int, size int64, hash encode.Hash) (partner.Checker, error) {
	bad := func(err error) error {
		return &partner.CorruptionError{Path: p, Rank: rank, Err: fmt.Errorf("%w: %w", partner.ErrHashMismatch, err)}
	}
	rd, err := fileformat.OpenPreamble(p, preamble)
	if err != nil {
		return nil, bad(err)
	}
	sum := rd.Summary()
	if sum.Checksum != hash {
		return nil, bad(fmt.Errorf("the preamble's FTI-FF checksum %s is not the recorded %s", Digest(sum.Checksum), Digest(hash)))
	}
	if sum.FileSize != size {
		return nil, bad(fmt.Errorf("the preamble describes %d bytes, the file has %d", sum.FileSize, size))
	}
	v, err := rd.NewVerifier()
	if err != nil {
		return nil, bad(err)
	}
	return v, nil
}

// formatOf returns the partner.Format checking entry f, nil for a BLAKE3
// digest.
func formatOf(env *Env, f File) partner.Format {
	if f.Attrs[AttrDigest] == DigestFTIFF {
		return ftiffFormat{piece: transfer(env)}
	}
	return nil
}
