package levels

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/h5ckpt"
	"github.com/ftigo/ftigo/vfd"
)

// HDF5 L4 names and digest kind.
//
// wire format: never change — stored in manifests and read at recovery.
const (
	// H5Name is the HDF5 file of an L4 checkpoint written by [Global4H5]
	// inside the checkpoint's directory of the global area.
	H5Name = "l4.h5"
	// DigestH5, under [AttrDigest], says the entry's bytes are (part of)
	// an HDF5 checkpoint file (docs/format/h5ckpt.md) and Digest is the
	// file's tables hash (h5ckpt's ftigo_tables_blake3), which covers
	// every block hash of every variable. A container entry is the file;
	// a data entry, marked [AttrInContainer] and naming the file under
	// [AttrContainer], is one rank's variables in it.
	DigestH5 = "h5ckpt"
)

// Global4H5 is level 4 written as one HDF5 file in the global area (FTI's
// ckpt_io = 5): every rank writes its variables, and the hyperslabs of the
// global datasets, straight into the file through package h5ckpt, so
// h5py and h5dump read the whole state and a restart on any number of
// ranks can read it. The engine calls it as a [DataOpener]: OpenData
// hands each rank an [H5File] naming the file (under its tmp name), the
// runtime's [WriteFunc] writes it collectively with h5ckpt.Write, and
// ProtectData records it: rank 0 lists the file (role "container",
// digest kind [DigestH5]) and every rank's data entry points into it.
// Recovery checks the tables against the recorded hash and this rank's
// blocks against their hashes; the data stays in the file (the runtime
// reads it with h5ckpt).
type Global4H5 struct{}

// Global4H5's capabilities.
var (
	_ Level        = Global4H5{}
	_ DataOpener   = Global4H5{}
	_ RaiseChecker = Global4H5{}
)

// ID returns L4.
func (Global4H5) ID() ID { return L4 }

// CanRaise refuses: the ranks write the HDF5 file themselves, so no L1
// data file can be raised to it ([RaiseChecker]).
func (Global4H5) CanRaise() error {
	return errors.New("the HDF5 L4 is written by the ranks themselves")
}

// DataArea returns Global: the data lives in the global area.
func (Global4H5) DataArea() Where { return Global }

// Protect is never called: the level writes through OpenData.
func (Global4H5) Protect(*Env, *Pending) error {
	return errors.New("levels: the HDF5 L4 writes through OpenData, not Protect")
}

// OpensData reports true.
func (Global4H5) OpensData() bool { return true }

// H5File is what [Global4H5.OpenData] gives each rank: not a file to
// write bytes into, but the name under which the [WriteFunc] writes the
// checkpoint's HDF5 file collectively (h5ckpt.Write(comm, Driver, Path,
// ...)). Its vfd.File methods refuse to write.
type H5File struct {
	// Path is the file's full path (with TmpSuffix) in Driver.
	Path string
	// Driver is the global area's driver.
	Driver vfd.Driver
}

var _ vfd.File = (*H5File)(nil)

// Name returns Path.
func (h *H5File) Name() string { return h.Path }

// ReadAt refuses: nothing is read through this handle.
func (h *H5File) ReadAt([]byte, int64) (int, error) {
	return 0, fmt.Errorf("%s: %w: write the HDF5 checkpoint with h5ckpt.Write", h.Path, vfd.ErrUnsupported)
}

// WriteAt refuses: nothing is written through this handle.
func (h *H5File) WriteAt([]byte, int64) (int, error) {
	return 0, fmt.Errorf("%s: %w: write the HDF5 checkpoint with h5ckpt.Write", h.Path, vfd.ErrUnsupported)
}

// Size returns the size of the file written under Path, or 0.
func (h *H5File) Size() (int64, error) {
	fi, err := h.Driver.Stat(h.Path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		}
		return 0, err
	}
	return fi.Size(), nil
}

// Truncate refuses.
func (h *H5File) Truncate(int64) error {
	return fmt.Errorf("%s: %w", h.Path, vfd.ErrUnsupported)
}

// Sync does nothing: h5ckpt.Write synced the file.
func (h *H5File) Sync() error { return nil }

// Close does nothing.
func (h *H5File) Close() error { return nil }

// OpenData creates the checkpoint's directory in the global area and
// returns the [H5File] every rank's WriteFunc writes. Collective.
func (Global4H5) OpenData(env *Env, p *Pending, _ int64) (vfd.File, error) {
	dir := env.Global.Path(p.Dir)
	var merr error
	if env.Rank == 0 {
		merr = env.Global.Driver.MkdirAll(dir, 0o755)
	}
	if err := comm.Agree(env.Comm, merr, "create L4 directory"); err != nil {
		return nil, err
	}
	return &H5File{Path: env.Global.Path(path.Join(p.Dir, H5Name)) + TmpSuffix, Driver: env.Global.Driver}, nil
}

// ProtectData records the HDF5 file on this rank's data entry and, on
// rank 0, as the checkpoint's container entry. The digest is the file's
// tables hash, which the WriteFunc returned as every rank's data digest
// (h5ckpt.WithResult). Collective.
func (Global4H5) ProtectData(env *Env, p *Pending, f vfd.File) error {
	hf, ok := f.(*H5File)
	if !ok {
		return fmt.Errorf("levels: HDF5 L4 ProtectData got a %T", f)
	}
	name := path.Join(p.Dir, H5Name)
	data := &p.Files[0]
	if data.Attrs == nil {
		data.Attrs = map[string]string{}
	}
	data.Attrs[AttrContainer] = name
	data.Attrs[AttrInContainer] = "1"
	data.Attrs[AttrDigest] = DigestH5
	var lerr error
	var size int64
	if env.Rank == 0 {
		size, lerr = hf.Size()
		if lerr == nil && size == 0 {
			lerr = fmt.Errorf("%w: %s was not written", ErrMissingFile, hf.Path)
		}
	}
	if err := comm.Agree(env.Comm, lerr, "check the HDF5 L4 file"); err != nil {
		return err
	}
	if env.Rank == 0 {
		p.Files = append(p.Files, File{Role: RoleContainer, Where: Global, Name: name, Size: size, Digest: data.Digest, Of: 0,
			Attrs: map[string]string{AttrDigest: DigestH5}})
		env.Logger.Debug("L4 HDF5 file written", zap.String("path", name), zap.Int64("size", size))
	}
	return nil
}

// AbortData removes the file, if the WriteFunc left one. Collective only
// in that every rank calls it.
func (Global4H5) AbortData(env *Env, _ *Pending, f vfd.File) error {
	hf, ok := f.(*H5File)
	if !ok {
		return fmt.Errorf("levels: HDF5 L4 AbortData got a %T", f)
	}
	if env.Rank != 0 {
		return nil
	}
	return removeIfExists(hf.Driver, hf.Path)
}

// Recover checks the HDF5 file's tables against the recorded hash and
// every block of this rank's variables, and returns the file as this
// rank's source (the runtime reads it with h5ckpt). Under
// [Engine.RecoverOne], rank 0 has checked the tables once and handed
// this rank the view of its own variables ([Engine.h5Views]): the rank
// then reads only its own blocks, and the Source carries the view.
// Called alone, it parses the whole file's tables itself. An L4
// checkpoint written as a SIONlib container is recovered by [Global4],
// and Global4.Recover hands an HDF5 one to this level, so a restart reads
// whatever ckpt_io the checkpoint was written with. Makes no collective
// calls.
func (Global4H5) Recover(env *Env, m *Manifest) (Source, error) {
	f, ok := m.DataFile(env.Rank)
	if !ok {
		return Source{}, fmt.Errorf("%w: manifest lists no data file for rank %d", ErrMissingFile, env.Rank)
	}
	if f.Attrs[AttrDigest] != DigestH5 {
		// An L4 checkpoint of the SIONlib container (ckpt_io was not 5
		// when it was written): recovered as such.
		return Global4{Inline: f.Attrs[AttrInContainer] != ""}.Recover(env, m)
	}
	if env.h5err != nil {
		return Source{}, fmt.Errorf("L4: %w", env.h5err)
	}
	if env.h5view != nil {
		if err := verifyH5Through(env.Global, f, env.Rank, env.h5view); err != nil {
			return Source{}, fmt.Errorf("L4: %w", err)
		}
		return Source{Store: env.Global, Name: f.Attrs[AttrContainer], Size: f.Size, Digest: f.Digest, H5View: env.h5view}, nil
	}
	if err := verifyH5(env.Global, f, env.Rank); err != nil {
		return Source{}, fmt.Errorf("L4: %w", err)
	}
	return Source{Store: env.Global, Name: f.Attrs[AttrContainer], Size: f.Size, Digest: f.Digest}, nil
}

// h5Views prepares, when m is an L4 checkpoint written as one HDF5 file,
// each rank's view of it for [Global4H5.Recover]: rank 0 opens the file
// and checks its tables against the recorded hash once, then hands each
// rank the records and block hashes of its own variables alone
// (h5ckpt.File.RankView), so that no rank parses or hashes every rank's
// tables. A rank then reads and checks only its own blocks. It returns
// whether it set env.h5view or env.h5err. Collective: a fixed-size
// reduction decides, and only then a scatter of one view per rank.
func (e *Engine) h5Views(m *Manifest) (bool, error) {
	env := e.env
	if m.Level != L4 {
		return false, nil
	}
	var mine int64
	f, ok := m.DataFile(env.Rank)
	if ok && f.Attrs[AttrDigest] == DigestH5 {
		mine = 1
	}
	all, err := env.Comm.AllreduceInt64(mine, comm.Min)
	if err != nil {
		return false, err
	}
	if all == 0 {
		return false, nil
	}
	var parts [][]byte
	if env.Rank == 0 {
		parts = h5Parts(env.Global, f, env.Comm.Size())
	}
	part, err := comm.ScattervBytes(env.Comm, 0, parts)
	if err != nil {
		return false, fmt.Errorf("hand out the HDF5 L4 views: %w", err)
	}
	env.h5view, env.h5err = nil, nil
	switch {
	case len(part) > 0 && part[0] == h5PartView:
		env.h5view = part[1:]
	case len(part) > 0 && part[0] == h5PartMissing:
		env.h5err = fmt.Errorf("%w: %s (found by rank 0)", ErrMissingFile, part[1:])
	case len(part) > 0 && part[0] == h5PartCorrupt:
		env.h5err = fmt.Errorf("%w: %s (found by rank 0)", ErrDigestMismatch, part[1:])
	default:
		env.h5err = fmt.Errorf("%w: malformed HDF5 L4 view from rank 0", ErrDigestMismatch)
	}
	return true, nil
}

// The kinds of the parts [Engine.h5Views] scatters.
const (
	h5PartView byte = iota + 1
	h5PartMissing
	h5PartCorrupt
)

// h5Parts runs on rank 0: it opens the HDF5 file of entry f, checks its
// tables hash, and returns each of the n ranks' views, or to every rank
// the same error part.
func h5Parts(s Store, f File, n int) [][]byte {
	parts := make([][]byte, n)
	fail := func(err error) [][]byte {
		kind := h5PartCorrupt
		if errors.Is(err, ErrMissingFile) {
			kind = h5PartMissing
		}
		msg := append([]byte{kind}, err.Error()...)
		for r := range parts {
			parts[r] = msg
		}
		return parts
	}
	hf, err := openH5(s, f, 0, nil)
	if err != nil {
		return fail(err)
	}
	defer hf.Close()
	if hf.Ranks() != n {
		return fail(fmt.Errorf("%w: %s holds %d ranks, the job has %d", ErrDigestMismatch, s.Path(h5Name(f)), hf.Ranks(), n))
	}
	for r := range parts {
		v, err := hf.RankView(r)
		if err != nil {
			return fail(err)
		}
		parts[r] = append([]byte{h5PartView}, v...)
	}
	return parts
}

// h5Name is the HDF5 file an entry of digest kind [DigestH5] names.
func h5Name(f File) string {
	if c := f.Attrs[AttrContainer]; c != "" {
		return c
	}
	return f.Name
}

// openH5 opens the HDF5 file of entry f in s, through view (rank's,
// made by [h5ckpt.File.RankView]) when it is set, else whole, and checks
// its tables hash against f's digest; errors are CorruptionErrors
// naming rank.
func openH5(s Store, f File, rank int, view []byte) (*h5ckpt.File, error) {
	full := s.Path(h5Name(f))
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: full, Rank: rank, Offset: off, Err: err}
	}
	var hf *h5ckpt.File
	var err error
	if view != nil {
		hf, err = h5ckpt.OpenView(s.Driver, full, rank, view)
	} else {
		hf, err = h5ckpt.Open(s.Driver, full)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, cerr(0, fmt.Errorf("%w: %w", ErrMissingFile, err))
		}
		return nil, cerr(h5Offset(err), fmt.Errorf("%w: %w", ErrDigestMismatch, err))
	}
	if th := hf.TablesHash(); !bytes.Equal(th[:], f.Digest[:]) {
		hf.Close()
		return nil, cerr(0, fmt.Errorf("%w: tables hash %x, manifest says %s", ErrDigestMismatch, th, f.Digest))
	}
	return hf, nil
}

// verifyH5 checks an entry of digest kind [DigestH5] in the global area
// s: the file opens as an HDF5 checkpoint whose tables hash is the
// recorded digest, and the blocks of rank's variables (of every rank for
// rank < 0) match their hashes.
func verifyH5(s Store, f File, rank int) error {
	return verifyH5Through(s, f, rank, nil)
}

// verifyH5Through is [verifyH5], through rank's view when it is set:
// then only rank's own blocks are read.
func verifyH5Through(s Store, f File, rank int, view []byte) error {
	hf, err := openH5(s, f, rank, view)
	if err != nil {
		return err
	}
	defer hf.Close()
	if rank < 0 {
		err = hf.Verify()
	} else {
		err = hf.VerifyRank(rank)
	}
	if err != nil {
		return &CorruptionError{Path: s.Path(h5Name(f)), Rank: rank, Offset: h5Offset(err), Err: fmt.Errorf("%w: %w", ErrDigestMismatch, err)}
	}
	return nil
}

// h5Offset returns the file offset an h5ckpt error names, or 0.
func h5Offset(err error) int64 {
	var ce *h5ckpt.CorruptionError
	if errors.As(err, &ce) && ce.Offset > 0 {
		return ce.Offset
	}
	return 0
}
