package levels

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

// L4 names and manifest attributes.
//
// wire format: never change — stored in manifests and read at recovery.
const (
	// ContainerName is the L4 container's file name inside the
	// checkpoint's directory of the global area (file 0 of a set; the
	// others are ContainerName.000001 ...).
	ContainerName = "l4.sion"
	// AttrContainer, on a rank's data entry, names the container (relative
	// to the global area) holding the rank's data as a task.
	AttrContainer = "sion"
	// AttrTask, on a rank's data entry, is the rank's global task number in the container.
	AttrTask = "sion-task"
	// AttrFile and AttrNFiles, on a container entry, give its number in the set and the set's size.
	AttrFile   = "sion-file"
	AttrNFiles = "sion-nfiles"
	// AttrPlace, on a rank's data entry, is where its task lies in the
	// container, as the writer placed it: "file lrank start skip chunk"
	// ([sion.Place], five decimal numbers). With it a rank reads its
	// task's metadata alone; an entry without it (written before) has
	// the container's metadata read whole.
	AttrPlace = "sion-place"
)

// Global4 is level 4: every rank's data file becomes its task of one
// SIONlib container (or a set of NFiles) in the global area, opened
// collectively as FTI's L4 does with sion_paropen_mapped_mpi. Unlike FTI
// the manifest records each rank's digest and recovery checks it when a
// task is read back, and every size is 64-bit. Recovery of an inline
// checkpoint reads the rank's task straight from the container, verified;
// without Inline it uses the rank's local data file when it is intact and
// otherwise extracts the rank's task from the container, verified, into
// the local area.
//
// With Inline, each rank writes straight into its task ([Global4.OpenData],
// the engine's [DataOpener] path): nothing is written locally, nothing is
// read back, and the digest is the FTI-FF file checksum (or the BLAKE3 the
// writer computed). Without it, the data file is written locally first and
// [Global4.Protect] copies it into the container, whose physical files are
// hashed for the manifest.
type Global4 struct {
	// Inline writes the data straight into the container (FTI's inline L4).
	Inline bool
	// NFiles splits the container into this many physical files (ranks in
	// contiguous groups, SIONlib's rule); <= 1 means one file. Without
	// Inline, the rank leading each physical file re-reads it once to
	// record its BLAKE3 in the manifest.
	NFiles int
	// FSBlkSize is the container's alignment; <= 0 means 4096.
	FSBlkSize int32
}

// Global4's capabilities.
var (
	_ Level      = Global4{}
	_ DataOpener = Global4{}
	_ DataTapper = Global4{}
)

// ID returns L4.
func (Global4) ID() ID { return L4 }

// TapsData reports true: the copies into the container show the tap
// every byte they read ([DataTapper]).
func (Global4) TapsData() bool { return true }

// DataArea returns Local: where the data file is written before Protect
// copies it (without Inline), and where recovery restores it from the
// container when it is lost.
func (Global4) DataArea() Where { return Local }

func (l Global4) nfiles(size int) int { return max(1, min(l.NFiles, size)) }

// place returns the number of physical container files for a job of size
// ranks, and the physical file and rank within it of each rank: ranks are
// split into nf runs of size/nf, the last file taking the remainder.
func (l Global4) place(size int) (nf int, fileOf func(rank int) (file, lrank int)) {
	nf = l.nfiles(size)
	per := size / nf
	return nf, func(rank int) (int, int) {
		file := min(rank/per, nf-1)
		return file, rank - file*per
	}
}

// transfer returns the copy piece size of env.
func transfer(env *Env) int { return max(env.TransferSize, 4<<20) }

// Protect copies this rank's data file into the container. Collective.
func (l Global4) Protect(env *Env, p *Pending) error {
	c := env.Comm
	rank, size := c.Rank(), c.Size()
	data := &p.Files[0]
	cname := path.Join(p.Dir, ContainerName)
	full := env.Global.Path(cname)
	nf, fileOf := l.place(size)
	file, lrank := fileOf(rank)

	merr := env.Global.Driver.MkdirAll(path.Dir(full), 0o755)
	if err := comm.Agree(c, merr, "create L4 directory"); err != nil {
		return err
	}
	// Under the final names once the intent marker is durable (see
	// [Pending.Final]; rank 0 syncs the directories in closeContainer),
	// under tmp names renamed by the commit otherwise.
	final := p.Final()
	suffix := TmpSuffix
	if final {
		suffix = ""
	}
	pw, err := sion.CreateMapped(c, env.Global.Driver, full,
		[]sion.MappedTask{{GlobalRank: int64(rank), ChunkSize: data.Size, File: file, LocalRank: lrank}}, nf,
		&sion.Options{FSBlkSize: l.FSBlkSize, Policy: sion.PolicyFill, NoCommit: true, InPlace: final, Logger: env.Logger})
	if err != nil {
		return fmt.Errorf("open L4 container: %w", err)
	}
	cerr := copyIntoTask(env, p.DataPath(env), data.Size, pw.Task(0), p.tap)
	if err := comm.Agree(c, cerr, "copy data into L4 container"); err != nil {
		return errors.Join(err, pw.Abort())
	}
	place, err := pw.Place(0)
	if err != nil {
		return errors.Join(err, pw.Abort())
	}
	if err := closeContainer(env, pw, cname, final); err != nil {
		return err
	}
	if data.Attrs == nil {
		data.Attrs = map[string]string{}
	}
	data.Attrs[AttrContainer] = cname
	data.Attrs[AttrTask] = strconv.Itoa(rank)
	data.Attrs[AttrPlace] = formatPlace(place)
	if lrank != 0 {
		return nil
	}
	// This rank leads physical file `file`: list it, with its digest.
	name := sion.SetMemberName(cname, file)
	f, err := vfd.OpenRead(env.Global.Driver, env.Global.Path(name)+suffix)
	if err != nil {
		return fmt.Errorf("open L4 container for its digest: %w", err)
	}
	defer f.Close()
	fsize, err := f.Size()
	if err != nil {
		return err
	}
	d, err := FileDigest(f)
	if err != nil {
		return fmt.Errorf("digest of L4 container: %w", err)
	}
	p.Files = append(p.Files, File{Role: RoleContainer, Where: Global, Name: name, Size: fsize, Digest: d, Of: rank,
		Attrs: map[string]string{AttrFile: strconv.Itoa(file), AttrNFiles: strconv.Itoa(nf)}})
	if final {
		p.WroteFinal(Global, name)
	}
	env.Logger.Debug("L4 container written", zap.String("path", name), zap.Int64("size", fsize))
	return nil
}

// copyIntoTask streams size bytes of the named local file into tw,
// showing each piece to tap (when not nil) while it is written.
func copyIntoTask(env *Env, src string, size int64, tw *sion.TaskWriter, tap io.Writer) error {
	f, err := vfd.OpenRead(env.Local.Driver, src)
	if err != nil {
		return fmt.Errorf("open data file: %w", err)
	}
	defer f.Close()
	buf := make([]byte, min(int64(transfer(env)), max(size, 1)))
	for off := int64(0); off < size; {
		n := min(int64(len(buf)), size-off)
		if err := vfd.ReadFull(f, buf[:n], off); err != nil {
			return vfd.WrapPathAt(err, "read", src, off)
		}
		tapped := showTap(tap, buf[:n])
		_, err := tw.Write(buf[:n])
		<-tapped
		if err != nil {
			return err
		}
		off += n
	}
	return nil
}

// Recover returns this rank's data. A rank whose data entry lives only
// in the container ([AttrInContainer], the inline L4) reads its task
// straight from the container, verified against the manifest (into
// memory under [Env.ImageLimit]): nothing is written locally, so the
// restart reads each byte once. A local copy staged by an older version
// of ftigo is used first when it is intact. Without Inline, the local
// data file is used when it is intact, otherwise the rank's task is
// extracted from the container, its size and digest checked, into the
// local area (restoring the file the manifest lists). Makes no
// collective calls.
func (l Global4) Recover(env *Env, m *Manifest) (Source, error) {
	f, ok := m.DataFile(env.Rank)
	if !ok {
		return Source{}, fmt.Errorf("%w: manifest lists no data file for rank %d", ErrMissingFile, env.Rank)
	}
	if f.Attrs[AttrDigest] == DigestH5 {
		// Written as one HDF5 file (ckpt_io = 5 then, whatever it is now).
		return Global4H5{}.Recover(env, m)
	}
	local := env.Store(f.Where)
	inContainer := f.Attrs[AttrInContainer] != ""
	// A copy in the local area is a file of its own even when the entry
	// says the data lives only in the container.
	lf := f
	if inContainer {
		lf.Attrs = make(map[string]string, len(f.Attrs))
		for k, v := range f.Attrs {
			if k != AttrInContainer {
				lf.Attrs[k] = v
			}
		}
	}
	var lerr error
	if !inContainer || localExists(local, f.Name) {
		src, err := verifySource(env, local, lf)
		if err == nil {
			return src, nil
		}
		lerr = err
	}
	if inContainer {
		switch {
		case lerr == nil || errors.Is(lerr, ErrMissingFile):
		case env.tentative:
			// This manifest copy disagrees with the other one: the file
			// may be the other copy's checkpoint (an L1 file of this
			// run under a manifest from another), which recovery tries
			// next. Leave it.
			env.Logger.Warn("L4: the local file does not match this manifest copy, which disagrees with the other copy; left in place; reading the container", zap.Error(lerr))
		default:
			// A damaged cache: not the checkpoint's, not worth keeping.
			env.Logger.Warn("L4: removing a damaged local copy of the rank's task; reading the container", zap.Error(lerr))
			if err := removeIfExists(local.Driver, local.Path(f.Name)); err != nil {
				env.Logger.Warn("L4: removing the damaged local copy", zap.Error(err))
			}
		}
		ff := f
		src, err := verifySource(env, env.Global, ff)
		if err != nil {
			// The data lives only in the container: a local copy is a
			// cache, whose absence says nothing.
			return Source{}, fmt.Errorf("L4: the container is %s: %w", Damage(err), err)
		}
		src.Task = &ff
		return src, nil
	}
	if err := l.extract(env, m, f, local); err != nil {
		return Source{}, fmt.Errorf("L4: the local data file is %s (%v), and the container is %s: %w", Damage(lerr), lerr, Damage(err), err)
	}
	env.Logger.Info("L4: data file rebuilt from the container", zap.String("path", local.Path(f.Name)))
	return Source{Store: local, Name: f.Name, Size: f.Size, Digest: f.Digest}, nil
}

// localExists reports whether name exists in s (an error other than
// not-existing counts as existing: the check that follows reports it).
func localExists(s Store, name string) bool {
	_, err := s.Driver.Stat(s.Path(name))
	return !errors.Is(err, fs.ErrNotExist)
}

// verifySource verifies the data entry f in s ([VerifyFile]), reading it
// into memory as it does when [Env.ImageLimit] allows, and returns it as
// a Source (the caller sets Task for a container's task).
func verifySource(env *Env, s Store, f File) (Source, error) {
	src := Source{Store: s, Name: f.Name, Size: f.Size, Digest: f.Digest}
	if wantImage(env, f) {
		img, err := verifyImage(s, f, transfer(env))
		src.Image = img
		return src, err
	}
	return src, VerifyFile(s, f)
}

// Damage says how a file failed its check, for messages: "missing" when
// it is absent, "corrupt" when its bytes are wrong.
func Damage(err error) string {
	if errors.Is(err, ErrMissingFile) || errors.Is(err, fs.ErrNotExist) {
		return "missing"
	}
	return "corrupt"
}

// extract writes this rank's task of the container to local/f.Name with
// the commit protocol, verifying size and digest.
func (l Global4) extract(env *Env, m *Manifest, f File, local Store) error {
	cname := f.Attrs[AttrContainer]
	if cname == "" {
		cname = path.Join(m.Dir(), ContainerName)
	}
	full := env.Global.Path(cname)
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: full, Rank: env.Rank, Offset: off, Err: err}
	}
	r, t, err := openContainerTask(env.Global.Driver, full, f, int64(env.Rank), cerr)
	if err != nil {
		return err
	}
	defer r.Close()
	task := t.Index
	sr, err := r.TaskReader(task)
	if err != nil {
		return cerr(0, err)
	}
	if sr.Size() != f.Size {
		return cerr(0, fmt.Errorf("%w: task %d holds %d bytes, manifest says %d", ErrSizeMismatch, task, sr.Size(), f.Size))
	}
	dst := local.Path(f.Name)
	if err := vfd.MkdirDurable(local.Driver, path.Dir(dst)); err != nil {
		return err
	}
	tmp := dst + TmpSuffix
	out, err := vfd.CreateTrunc(local.Driver, tmp)
	if err != nil {
		return err
	}
	fail := func(err error) error { return errors.Join(err, out.Close(), local.Driver.Remove(tmp)) }
	ftiff := f.Attrs[AttrDigest] == DigestFTIFF
	h := b3.New()
	buf := make([]byte, min(int64(transfer(env)), max(f.Size, 1)))
	for off := int64(0); off < f.Size; {
		n := min(int64(len(buf)), f.Size-off)
		if _, err := sr.ReadAt(buf[:n], off); err != nil {
			return fail(cerr(off, err))
		}
		if !ftiff {
			h.Write(buf[:n])
		}
		if _, err := out.WriteAt(buf[:n], off); err != nil {
			return fail(err)
		}
		off += n
	}
	if ftiff {
		// The FTI-FF checksum and every block hash, checked on the copy.
		if err := verifyFTIFF(out, f, cerr); err != nil {
			return fail(err)
		}
	} else {
		var d Digest
		copy(d[:], h.Sum(nil))
		if d != f.Digest {
			return fail(cerr(0, fmt.Errorf("%w: task %d has %s, manifest says %s", ErrDigestMismatch, task, d, f.Digest)))
		}
	}
	if err := out.Sync(); err != nil {
		return fail(err)
	}
	if err := out.Close(); err != nil {
		return errors.Join(err, local.Driver.Remove(tmp))
	}
	if err := local.Driver.Rename(tmp, dst); err != nil {
		return errors.Join(err, local.Driver.Remove(tmp))
	}
	return local.Driver.SyncDir(path.Dir(dst))
}

// CopyWrite returns a [WriteFunc] that writes a copy of the data file src
// (for example the [Source] of the last checkpoint, from [Engine.Recover]
// or the latest manifest) and fails with [ErrDigestMismatch] unless the
// copy has src's digest. With [Engine.Checkpoint] at L4 it flushes an
// existing checkpoint to global storage, which is how keep_last_ckpt keeps
// the last checkpoint at Finalize.
func CopyWrite(src Source) WriteFunc {
	return func(f vfd.File) (int64, Digest, bool, error) {
		in, err := vfd.OpenRead(src.Store.Driver, src.Store.Path(src.Name))
		if err != nil {
			return 0, Digest{}, false, vfd.WrapPath(err, "open", src.Name)
		}
		defer in.Close()
		h := b3.New()
		buf := make([]byte, min(int64(4<<20), max(src.Size, 1)))
		for off := int64(0); off < src.Size; {
			n := min(int64(len(buf)), src.Size-off)
			if err := vfd.ReadFull(in, buf[:n], off); err != nil {
				return off, Digest{}, false, vfd.WrapPathAt(err, "read", src.Name, off)
			}
			h.Write(buf[:n])
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return off, Digest{}, false, err
			}
			off += n
		}
		var d Digest
		copy(d[:], h.Sum(nil))
		if d != src.Digest {
			return src.Size, d, true, &CorruptionError{Path: src.Store.Path(src.Name), Rank: -1, Err: fmt.Errorf("%w: copy has %s, source says %s", ErrDigestMismatch, d, src.Digest)}
		}
		return src.Size, d, true, nil
	}
}
