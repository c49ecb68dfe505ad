package levels

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/ftigo/ftigo/internal/partner"
)

// L3 manifest attributes on parity files.
//
// wire format: never change — stored in manifests and read at recovery.
const (
	AttrRSK     = "rs-k"     // data shards (group size)
	AttrRSM     = "rs-m"     // parity shards
	AttrRSIndex = "rs-index" // the group member holding this file
	AttrRSUnit  = "rs-unit"  // stripe unit of the rotated scheme (m < k)
)

// RS3 is level 3: the data file on node-local storage plus Reed-Solomon
// parity across the rank's group (FTI's FTI_RSenc). Every member of a
// group of k holds one parity file (docs/format/parity.md), listed with
// role "parity". With M = k (the default, FTI's) each parity file is as
// large as the largest data file and any k of the group's 2k files may be
// lost, that is up to half its nodes. With 1 <= M < k the parity is
// rotated over stripes as SCR does: each parity file is about M/(k-M) of
// a data file and any M members may lose all their files. Encoding is
// distributed and pipelined (see [partner.EncodeGroup]); recovery rebuilds
// what the code allows and refuses more (see [partner.RebuildGroup]).
type RS3 struct {
	// M is the parity count; 0 or more than the group size means the
	// group size.
	M int
	// Buffers, when not nil, recycles transfer blocks between checkpoints.
	Buffers *partner.Buffers
}

func (l RS3) options(env *Env) partner.Options {
	o := partnerOptions(env)
	o.Buffers = l.Buffers
	return o
}

// RS3's capabilities.
var (
	_ Level            = RS3{}
	_ DataReader       = RS3{}
	_ Prenamer         = RS3{}
	_ OfflineRebuilder = RS3{}
	_ FTIFFRecorder    = RS3{}
	_ DataTapper       = RS3{}
)

// ID returns L3.
func (RS3) ID() ID { return L3 }

// ReadsData reports true: Protect encodes the whole data file, hashing it
// unless its FTI-FF checksum is recorded (see [DataReader]).
func (RS3) ReadsData() bool { return true }

// RecordsFTIFF reports true: the encoder checks the bytes it reads
// against the block hashes, and a file rebuilt from parity is checked
// against the checksum ([FTIFFRecorder]).
func (RS3) RecordsFTIFF() bool { return true }

// TapsData reports true: the encoder shows the tap every byte it reads
// ([DataTapper]).
func (RS3) TapsData() bool { return true }

// DataArea returns Local.
func (RS3) DataArea() Where { return Local }

// Protect encodes the group's data files into parity. Collective.
func (l RS3) Protect(env *Env, p *Pending) error {
	if err := env.Topo.Validate(int(L3)); err != nil {
		return err
	}
	name := RankFileName(p.Dir, RoleParity, env.Rank)
	to := partner.Ref{Driver: env.Local.Driver, Path: env.Local.Path(name) + p.FileSuffix(name)}
	data := dataInfo(env, p)
	var (
		tap    *dataTap
		tapErr error
	)
	if data.Format != nil && !p.raising {
		// The encoder reads an FTI-FF data file without hashing it: a
		// byte changed since the write would be encoded unnoticed, the
		// checkpoint committed and lost at the restart that needs it. The
		// tap checks every byte the encoder reads against the file's
		// block hashes and checksum, so such a checkpoint fails instead
		// and the one before it stays. (L2's receivers check the same.)
		f := cloneFile(p.Data())
		if p.Published == 0 {
			f.Name += TmpSuffix
		}
		if tap, tapErr = newDataTap(env.Store(f.Where), f); tap != nil {
			data.Tap = tap
		}
	}
	par, err := partner.EncodeGroup(env.Comm, env.Topo, l.options(env), l.M, data, to)
	if tap != nil {
		tapErr = tap.verdict(err)
	}
	if err == nil && tapErr != nil {
		// The parity encodes bytes that are not the checkpoint's.
		if rerr := to.Driver.Remove(to.Path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			tapErr = errors.Join(tapErr, rerr)
		}
	}
	if err != nil || tapErr != nil {
		return fmt.Errorf("L3: %w", errors.Join(err, tapErr))
	}
	if p.DigestPending {
		p.SetDataDigest(Digest(par.Data))
	}
	attrs := map[string]string{
		AttrRSK:     strconv.Itoa(par.Header.K),
		AttrRSM:     strconv.Itoa(par.Header.M),
		AttrRSIndex: strconv.Itoa(par.Index),
	}
	if par.Header.Unit > 0 {
		attrs[AttrRSUnit] = strconv.Itoa(par.Header.Unit)
	}
	p.Files = append(p.Files, File{Role: RoleParity, Where: Local, Name: name, Size: par.Size, Digest: Digest(par.Hash), Of: env.Rank, Attrs: attrs})
	return nil
}

// Prenames returns the name of this rank's parity file (see [Prenamer]).
func (RS3) Prenames(env *Env, p *Pending) []string {
	if env.Topo.Validate(int(L3)) != nil {
		return nil
	}
	return []string{RankFileName(p.Dir, RoleParity, env.Rank)}
}

// shape returns the parity count and stripe unit recorded in m for the
// parity file of rank r (every member of a group wrote the same values:
// the unit depends on the group's largest file), or the level's own
// parity count when m lists none.
func (l RS3) shape(m *Manifest, r int) partner.Shape {
	if f, ok := heldFile(m, r, RoleParity, r); ok {
		if v, err := strconv.Atoi(f.Attrs[AttrRSM]); err == nil && v > 0 {
			u, _ := strconv.Atoi(f.Attrs[AttrRSUnit])
			return partner.Shape{M: v, Unit: max(u, 0)}
		}
	}
	return partner.Shape{M: l.M}
}

// Recover checks this rank's data and parity files and rebuilds the
// group's lost files. Collective.
func (l RS3) Recover(env *Env, m *Manifest) (Source, error) {
	if err := env.Topo.Validate(int(L3)); err != nil {
		return Source{}, err
	}
	data, okd := m.DataFile(env.Rank)
	par, okp := heldFile(m, env.Rank, RoleParity, env.Rank)
	var own, pi partner.FileInfo
	o := l.options(env)
	var parityChecked chan error
	if okp {
		pi = fileInfo(env.Store(par.Where), par, "")
		if okd {
			// The parity file is checked while the data file is: the two
			// reads overlap instead of following each other.
			parityChecked = make(chan error, 1)
			go func(pi partner.FileInfo) { parityChecked <- pi.Check(env.Rank, o.BlockSize) }(pi)
		}
	}
	if okd {
		own = ownInfo(env, data)
	}
	if parityChecked != nil {
		pi.CheckErr, pi.Checked = <-parityChecked, true
	}
	if okd && wantImage(env, data) {
		o.ImageLimit = env.ImageLimit
	}
	res, err := partner.RebuildGroup(env.Comm, env.Topo, o, l.shape(m, env.Rank), own, pi)
	if err != nil {
		return Source{}, fmt.Errorf("L3: %w", err)
	}
	if !okd {
		return Source{}, fmt.Errorf("%w: manifest lists no data file for rank %d", ErrMissingFile, env.Rank)
	}
	src := Source{Store: env.Store(data.Where), Name: data.Name, Size: data.Size, Digest: data.Digest, Image: own.Image}
	if res.DataRebuilt {
		src.Image = res.DataImage
	}
	return src, nil
}

// RebuildOffline rebuilds the lost or corrupted files of an L3
// checkpoint without a running job: local(n) is the local area of node n.
// It returns the paths it wrote; groups that lost more than their code
// tolerates are reported in an error wrapping [partner.ErrUnrecoverable].
func (l RS3) RebuildOffline(m *Manifest, topo *partner.Topology, local func(node int) Store, o partner.Options) ([]string, error) {
	data, parity, err := offlineFiles(m, topo, local, RoleParity, func(r int) int { return r })
	if err != nil {
		return nil, err
	}
	shapes := make([]partner.Shape, m.Ranks)
	for r := range shapes {
		shapes[r] = l.shape(m, r)
	}
	res, err := partner.RebuildL3Offline(topo, o, shapes, data, parity)
	return res.Paths, err
}
