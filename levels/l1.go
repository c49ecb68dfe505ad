package levels

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/vfd"
)

// Local1 is level 1: the data file on node-local storage, nothing else.
// A checkpoint at L1 is recoverable only if every rank's file is present,
// has its recorded size and digest.
type Local1 struct{}

// ID returns L1.
func (Local1) ID() ID { return L1 }

// DataArea returns Local.
func (Local1) DataArea() Where { return Local }

// Protect does nothing: L1 adds no redundancy.
func (Local1) Protect(*Env, *Pending) error { return nil }

// Recover verifies this rank's data file.
func (Local1) Recover(env *Env, m *Manifest) (Source, error) {
	f, ok := m.DataFile(env.Rank)
	if !ok {
		return Source{}, fmt.Errorf("%w: manifest lists no data file for rank %d", ErrMissingFile, env.Rank)
	}
	s := env.Store(f.Where)
	if err := VerifyFile(s, f); err != nil {
		return Source{}, err
	}
	return Source{Store: s, Name: f.Name, Size: f.Size, Digest: f.Digest}, nil
}

// Digest kinds, in a file's Attrs under [AttrDigest].
//
// wire format: never change — stored in manifests.
const (
	// AttrDigest names how File.Digest was computed; absent means the
	// BLAKE3-256 of all the file's bytes.
	AttrDigest = "digest"
	// DigestFTIFF: the file is an FTI-FF file and Digest is its file
	// checksum (BLAKE3 over its chunk hashes, docs/format/ftiff.md);
	// verifying it re-hashes every block of every chunk and checks the
	// header, metadata and file block (fileformat's Verify). The L1 engine
	// records it to avoid hashing the data twice.
	DigestFTIFF = "ftiff"
)

// VerifyFile checks that the file f of a manifest exists in s with its
// recorded size and digest (of the kind its Attrs name). The error is a
// *CorruptionError wrapping [ErrMissingFile], [ErrSizeMismatch] or
// [ErrDigestMismatch].
func VerifyFile(s Store, f File) error {
	p := s.Path(f.Name)
	cerr := func(off int64, err error) error { return &CorruptionError{Path: p, Rank: f.Of, Offset: off, Err: err} }
	file, err := s.Driver.Open(p, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return cerr(0, ErrMissingFile)
		}
		return cerr(0, fmt.Errorf("%w: %w", ErrMissingFile, err))
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return cerr(0, err)
	}
	if size != f.Size {
		return cerr(size, fmt.Errorf("%w: %d bytes, manifest says %d", ErrSizeMismatch, size, f.Size))
	}
	if f.Attrs[AttrDigest] == DigestFTIFF {
		return verifyFTIFF(file, f, cerr)
	}
	d, err := FileDigest(file)
	if err != nil {
		return cerr(0, err)
	}
	if d != f.Digest {
		return cerr(0, fmt.Errorf("%w: got %s, manifest says %s", ErrDigestMismatch, d, f.Digest))
	}
	return nil
}

// verifyFTIFF checks an FTI-FF file completely and compares its checksum.
func verifyFTIFF(file vfd.File, f File, cerr func(int64, error) error) error {
	rd, err := fileformat.Open(file)
	if err == nil {
		err = rd.Verify()
	}
	if err != nil {
		var fe *fileformat.CorruptionError
		off := int64(0)
		if errors.As(err, &fe) {
			off = fe.Offset
		}
		return cerr(off, fmt.Errorf("%w: %w", ErrDigestMismatch, err))
	}
	if d := Digest(rd.Summary().Checksum); d != f.Digest {
		return cerr(0, fmt.Errorf("%w: FTI-FF checksum %s, manifest says %s", ErrDigestMismatch, d, f.Digest))
	}
	return nil
}
