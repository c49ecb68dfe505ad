package levels

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"strconv"
	"strings"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// Local1 is level 1: the data file on node-local storage, nothing else.
// A checkpoint at L1 is recoverable only if every rank's file is present,
// has its recorded size and digest.
type Local1 struct{}

// Local1's capabilities.
var (
	_ Level         = Local1{}
	_ FTIFFRecorder = Local1{}
)

// ID returns L1.
func (Local1) ID() ID { return L1 }

// RecordsFTIFF reports true: L1 reads no byte of the data file, so an
// FTI-FF file's checksum is its digest ([FTIFFRecorder]).
func (Local1) RecordsFTIFF() bool { return true }

// DataArea returns Local.
func (Local1) DataArea() Where { return Local }

// Protect does nothing: L1 adds no redundancy.
func (Local1) Protect(*Env, *Pending) error { return nil }

// Recover verifies this rank's data file (reading it into memory as it
// does under [Env.ImageLimit]).
func (Local1) Recover(env *Env, m *Manifest) (Source, error) {
	f, ok := m.DataFile(env.Rank)
	if !ok {
		return Source{}, fmt.Errorf("%w: manifest lists no data file for rank %d", ErrMissingFile, env.Rank)
	}
	s := env.Store(f.Where)
	src := Source{Store: s, Name: f.Name, Size: f.Size, Digest: f.Digest}
	if wantImage(env, f) {
		img, err := env.takeImage(m, s, f)
		if err != nil {
			return Source{}, err
		}
		src.Image = img
		return src, nil
	}
	if err := VerifyFile(s, f); err != nil {
		return Source{}, err
	}
	return src, nil
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
	// AttrL1Digest, on a data entry whose digest an asynchronous raise
	// recomputed as the BLAKE3 of its bytes (L2, L3), keeps the FTI-FF
	// checksum the L1 commit recorded, in hex: with it the raised
	// manifest and the L1 one are recognised as the same checkpoint
	// ([SameCheckpoint]). Informational; never used to verify the file.
	AttrL1Digest = "l1digest"
)

// VerifyFile checks that the file f of a manifest exists in s with its
// recorded size and digest (of the kind its Attrs name). s is the store of
// the area holding f's bytes: for a data entry marked [AttrInContainer],
// which has no file of its own, the global area holding its L4 container.
// Such an entry is checked inside the container: the rank's task must
// exist with the recorded size, and its bytes must verify as an FTI-FF
// file with the recorded checksum (or hash to the recorded BLAKE3). A
// container entry of digest kind [DigestSION] is checked by opening it
// with the sion reader (its metadata; its tasks are checked through the
// data entries). An entry of digest kind [DigestH5] is checked in its
// HDF5 file: the tables against the recorded hash, and every block of
// the rank's variables (of every rank, for the file's own entry). The error is a *CorruptionError naming the file and
// rank, wrapping [ErrMissingFile], [ErrSizeMismatch] or
// [ErrDigestMismatch].
func VerifyFile(s Store, f File) error {
	if f.Attrs[AttrDigest] == DigestH5 {
		rank := -1 // the file: every rank's blocks
		if f.Role == RoleData {
			rank = f.Of
		}
		return verifyH5(s, f, rank)
	}
	if f.Attrs[AttrInContainer] != "" {
		return verifyTask(s, f)
	}
	p := s.Path(f.Name)
	cerr := func(off int64, err error) error { return &CorruptionError{Path: p, Rank: f.Of, Offset: off, Err: err} }
	file, err := openSized(s, f)
	if err != nil {
		return err
	}
	defer file.Close()
	size := f.Size
	switch f.Attrs[AttrDigest] {
	case DigestFTIFF:
		return verifyFTIFF(file, f, cerr)
	case DigestSION:
		if _, err := sion.NewReader(file, size); err != nil {
			return cerr(sionOffset(err), fmt.Errorf("%w: %w", ErrDigestMismatch, err))
		}
		return nil
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

// sionOffset returns the offset a sion error names, or 0.
func sionOffset(err error) int64 {
	var se *sion.CorruptionError
	if errors.As(err, &se) {
		return se.Offset
	}
	return 0
}

// ContainerPath returns the L4 container (file 0 of its set, relative to
// the global area) holding the data entry f as a task, and the task's
// global rank; ok is false when f names no container.
func ContainerPath(f File) (name string, rank int64, ok bool) {
	name = f.Attrs[AttrContainer]
	if name == "" {
		return "", 0, false
	}
	rank = int64(f.Of)
	if t, err := strconv.ParseInt(f.Attrs[AttrTask], 10, 64); err == nil {
		rank = t
	}
	return name, rank, true
}

// OpenTask opens the L4 container in global holding the data entry f and
// returns f's task as a read-only file (Close releases the container). The
// error is a *CorruptionError naming the container and the rank: a
// missing container or task wraps [ErrMissingFile], a task of another
// size [ErrSizeMismatch], unreadable container metadata
// [ErrDigestMismatch].
func OpenTask(global Store, f File) (vfd.File, error) {
	cname, rank, ok := ContainerPath(f)
	if !ok {
		return nil, &CorruptionError{Path: global.Path(f.Name), Rank: f.Of, Err: fmt.Errorf("%w: the entry names no L4 container", ErrMissingFile)}
	}
	full := global.Path(cname)
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: full, Rank: f.Of, Offset: off, Err: err}
	}
	r, t, err := openContainerTask(global.Driver, full, f, rank, cerr)
	if err != nil {
		return nil, err
	}
	if t.Size != f.Size {
		return nil, errors.Join(cerr(0, fmt.Errorf("%w: task %d holds %d bytes, manifest says %d", ErrSizeMismatch, t.Index, t.Size, f.Size)), r.Close())
	}
	sr, err := r.TaskReader(t.Index)
	if err != nil {
		return nil, errors.Join(cerr(0, err), r.Close())
	}
	return &taskView{SectionReader: sr, r: r, name: fmt.Sprintf("%s (task of rank %d)", full, rank)}, nil
}

// openContainerTask opens the task with global rank rank of the L4
// container full, which the data entry f names. With the task's place
// on the entry ([AttrPlace]) only that task's metadata is read
// ([sion.OpenTask]): a rank's cost does not grow with the ranks. An
// entry without it (written by an older ftigo) has the whole
// container's metadata read. So does a task whose metadata disagrees
// with its place: the whole reader then finds the task elsewhere, or
// names the damage as it always did. Errors are made by cerr: a missing
// container or task wraps [ErrMissingFile], bad metadata
// [ErrDigestMismatch] at the offset the sion reader names.
func openContainerTask(d vfd.Driver, full string, f File, rank int64, cerr func(int64, error) error) (*sion.Reader, sion.Task, error) {
	bad := func(err error) (*sion.Reader, sion.Task, error) {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, sion.Task{}, cerr(0, fmt.Errorf("%w: %w", ErrMissingFile, err))
		}
		return nil, sion.Task{}, cerr(sionOffset(err), fmt.Errorf("%w: %w", ErrDigestMismatch, err))
	}
	if p, ok := taskPlace(f); ok {
		r, err := sion.OpenTask(d, full, rank, p)
		if errors.Is(err, fs.ErrNotExist) {
			return bad(err)
		}
		if err == nil {
			t, err := r.Task(0)
			if err != nil {
				return nil, sion.Task{}, errors.Join(cerr(0, err), r.Close())
			}
			return r, t, nil
		}
	}
	r, err := sion.Open(d, full)
	if err != nil {
		return bad(err)
	}
	for i := range r.NTasks() {
		if t, err := r.Task(i); err == nil && t.GlobalRank == rank {
			return r, t, nil
		}
	}
	return nil, sion.Task{}, errors.Join(cerr(0, fmt.Errorf("%w: no task with global rank %d", ErrMissingFile, rank)), r.Close())
}

// taskPlace returns the place of the data entry f's task in its L4
// container ([AttrPlace]); ok is false when f has none, or one this
// version cannot read (the container's metadata is then read whole).
func taskPlace(f File) (p sion.Place, ok bool) {
	v := strings.Fields(f.Attrs[AttrPlace])
	if len(v) != 5 {
		return sion.Place{}, false
	}
	var n [5]int64
	for i, s := range v {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil || x < 0 {
			return sion.Place{}, false
		}
		n[i] = x
	}
	if n[0] > math.MaxInt32 || n[1] > math.MaxInt32 {
		return sion.Place{}, false
	}
	return sion.Place{File: int(n[0]), LocalRank: int(n[1]), Start: n[2], Skip: n[3], Chunk: n[4]}, true
}

// formatPlace is the value of [AttrPlace] for p.
func formatPlace(p sion.Place) string {
	return fmt.Sprintf("%d %d %d %d %d", p.File, p.LocalRank, p.Start, p.Skip, p.Chunk)
}

// verifyTask checks the data entry f inside its L4 container in global.
func verifyTask(global Store, f File) error {
	tf, err := OpenTask(global, f)
	if err != nil {
		return err
	}
	defer tf.Close()
	cname, _, _ := ContainerPath(f)
	full := global.Path(cname)
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: full, Rank: f.Of, Offset: off, Err: err}
	}
	if f.Attrs[AttrDigest] == DigestFTIFF {
		return verifyFTIFF(tf, f, cerr)
	}
	d, err := FileDigest(tf)
	if err != nil {
		return cerr(0, err)
	}
	if d != f.Digest {
		return cerr(0, fmt.Errorf("%w: task has %s, manifest says %s", ErrDigestMismatch, d, f.Digest))
	}
	return nil
}

// taskView is an L4 task seen as a read-only vfd.File.
type taskView struct {
	*io.SectionReader
	r    *sion.Reader
	name string
}

func (t *taskView) Name() string         { return t.name }
func (t *taskView) Size() (int64, error) { return t.SectionReader.Size(), nil }
func (t *taskView) WriteAt([]byte, int64) (int, error) {
	return 0, fmt.Errorf("%s: %w", t.name, vfd.ErrReadOnly)
}
func (t *taskView) Truncate(int64) error { return fmt.Errorf("%s: %w", t.name, vfd.ErrReadOnly) }
func (t *taskView) Sync() error          { return nil }
func (t *taskView) Close() error         { return t.r.Close() }

// verifyFTIFF checks an FTI-FF file completely and compares its checksum.
func verifyFTIFF(file vfd.File, f File, cerr func(int64, error) error) error {
	rd, err := fileformat.Open(file)
	if err == nil {
		err = rd.Verify()
	}
	if err != nil {
		return ftiffError(err, cerr)
	}
	if d := Digest(rd.Summary().Checksum); d != f.Digest {
		return cerr(0, fmt.Errorf("%w: FTI-FF checksum %s, manifest says %s", ErrDigestMismatch, d, f.Digest))
	}
	return nil
}

// ftiffError is err, an FTI-FF file's failed check, as cerr makes a
// *CorruptionError of it: at the offset the fileformat error names,
// wrapping [ErrDigestMismatch].
func ftiffError(err error, cerr func(int64, error) error) error {
	var fe *fileformat.CorruptionError
	off := int64(0)
	if errors.As(err, &fe) {
		off = fe.Offset
	}
	return cerr(off, fmt.Errorf("%w: %w", ErrDigestMismatch, err))
}
