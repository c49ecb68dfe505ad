package levels

import (
	"fmt"

	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/internal/partner"
)

// Partner2 is level 2: the data file on node-local storage plus a copy on
// the node of the rank's right neighbour in its group ring (FTI's
// FTI_Ptner). The copy is streamed in [Env.BlockSize] pieces, written,
// synced and checked by the receiver (FTI does not sync it), and listed in
// the manifest by the receiving rank with role "partner" and Of set to
// the sender. The copy of an FTI-FF data file, whose entry records its
// checksum ([DigestFTIFF]), is checked against the writer's block hashes
// as it arrives (the file's header, metadata and file block sent ahead)
// and records the same checksum; the sender does not hash it. Recovery survives any set of lost or corrupted nodes
// in which no rank lost both its file and its copy, that is, no two lost
// nodes are ring neighbours.
type Partner2 struct {
	// Buffers, when not nil, recycles transfer blocks between checkpoints
	// (one per process, shared by all ranks, is enough).
	Buffers *partner.Buffers
	// SkipSourceHash drops the sender's own hash pass when the data
	// digest is already known (a WriteFunc that hashes while writing); the
	// receiver's check against the recorded digest still catches a
	// damaged source (see [partner.Options]). When the digest is left to
	// Protect ([Pending.DigestPending], ckpt's case) the sender must hash,
	// and does so once.
	SkipSourceHash bool
}

// Partner2's capabilities.
var (
	_ Level            = Partner2{}
	_ DataReader       = Partner2{}
	_ Prenamer         = Partner2{}
	_ OfflineRebuilder = Partner2{}
	_ FTIFFRecorder    = Partner2{}
	_ FTIFFChecker     = Partner2{}
	_ DataTapper       = Partner2{}
)

// ID returns L2.
func (Partner2) ID() ID { return L2 }

// DataArea returns Local.
func (Partner2) DataArea() Where { return Local }

func partnerOptions(env *Env) partner.Options {
	return partner.Options{BlockSize: env.BlockSize, Logger: env.Logger, Format: ftiffFormat{piece: transfer(env)}}
}

func (l Partner2) options(env *Env) partner.Options {
	o := partnerOptions(env)
	o.SkipSourceHash = l.SkipSourceHash
	o.Buffers = l.Buffers
	return o
}

// fileInfo is the file of entry f in s (under its name plus suffix),
// checked by its FTI-FF checksum when its entry records one
// ([ftiffFormat]), else by its BLAKE3.
func fileInfo(s Store, f File, suffix string) partner.FileInfo {
	fi := partner.FileInfo{Ref: partner.Ref{Driver: s.Driver, Path: s.Path(f.Name) + suffix}, Size: f.Size, Hash: encode.Hash(f.Digest)}
	if f.Attrs[AttrDigest] == DigestFTIFF {
		fi.Format = ftiffFormat{}
	}
	return fi
}

// dataInfo is the pending checkpoint's data file (its tmp name), with its
// hash to be computed by the transfer when the digest is pending.
func dataInfo(env *Env, p *Pending) partner.FileInfo {
	data := p.Data()
	suffix := TmpSuffix
	if p.Published > 0 {
		suffix = ""
	}
	fi := fileInfo(env.Store(data.Where), data, suffix)
	if fi.Format != nil {
		fi.Format, fi.Preamble = formatOf(env, data), p.preamble
	}
	if p.DigestPending {
		fi.Hash, fi.HashUnknown, fi.Format = encode.Hash{}, true, nil
	}
	fi.Tap = p.tap
	return fi
}

// ReadsData reports true: Protect sends the whole data file, hashing it
// unless its FTI-FF checksum is recorded (see [DataReader]).
func (Partner2) ReadsData() bool { return true }

// RecordsFTIFF reports true: the partner copy of an FTI-FF file is
// checked against its block hashes as it arrives ([FTIFFRecorder]).
func (Partner2) RecordsFTIFF() bool { return true }

// ChecksFTIFF reports true: the transfer checks an FTI-FF file against
// its checksum ([FTIFFChecker], [ftiffFormat]).
func (Partner2) ChecksFTIFF() bool { return true }

// TapsData reports true: the transfer shows the tap every byte it sends
// ([DataTapper]).
func (Partner2) TapsData() bool { return true }

// Protect sends this rank's data file to its right neighbour and receives
// its left neighbour's. Collective.
func (l Partner2) Protect(env *Env, p *Pending) error {
	if err := env.Topo.Validate(int(L2)); err != nil {
		return err
	}
	left := env.Topo.Left(env.Rank)
	name := RankFileName(p.Dir, RolePartner, left)
	copyTo := partner.Ref{Driver: env.Local.Driver, Path: env.Local.Path(name) + p.FileSuffix(name)}
	cp, err := partner.CopyToPartner(env.Comm, env.Topo, l.options(env), dataInfo(env, p), copyTo)
	if err != nil {
		return fmt.Errorf("L2: %w", err)
	}
	if p.DigestPending {
		p.SetDataDigest(Digest(cp.Sent))
	}
	f := File{Role: RolePartner, Where: Local, Name: name, Size: cp.Size, Digest: Digest(cp.Hash), Of: cp.Of}
	if cp.Formatted {
		// A byte-for-byte copy of an FTI-FF file checked against its
		// checksum as it arrived: the same digest.
		f.Attrs = map[string]string{AttrDigest: DigestFTIFF}
	}
	p.Files = append(p.Files, f)
	return nil
}

// Prenames returns the name of the partner copy this rank receives (see
// [Prenamer]).
func (Partner2) Prenames(env *Env, p *Pending) []string {
	if env.Topo.Validate(int(L2)) != nil {
		return nil
	}
	return []string{RankFileName(p.Dir, RolePartner, env.Topo.Left(env.Rank))}
}

// heldFile returns the file of role held by rank r for rank of in m.
func heldFile(m *Manifest, r int, role string, of int) (File, bool) {
	files, err := m.RankFiles(r)
	if err != nil {
		return File{}, false
	}
	for _, f := range files {
		if f.Role == role && f.Of == of {
			return f, true
		}
	}
	return File{}, false
}

// Recover checks this rank's data file and the copy it holds, and rebuilds
// what its ring neighbours can restore. Collective.
func (l Partner2) Recover(env *Env, m *Manifest) (Source, error) {
	if err := env.Topo.Validate(int(L2)); err != nil {
		return Source{}, err
	}
	left := env.Topo.Left(env.Rank)
	data, okd := m.DataFile(env.Rank)
	held, okh := heldFile(m, env.Rank, RolePartner, left)
	var own, cp partner.FileInfo
	if okd {
		// Checked by the recovery, beside its transfers, or as it is
		// sent when the right neighbour lost its copy (into memory
		// under the limit either way: src.Image).
		own = fileInfo(env.Store(data.Where), data, "")
	}
	if okh {
		cp = fileInfo(env.Store(held.Where), held, "")
	}
	o := l.options(env)
	if okd && wantImage(env, data) {
		o.ImageLimit = env.ImageLimit
	}
	res, err := partner.RecoverPartner(env.Comm, env.Topo, o, own, cp)
	if err != nil {
		return Source{}, fmt.Errorf("L2: %w", err)
	}
	if !okd {
		return Source{}, fmt.Errorf("%w: manifest lists no data file for rank %d", ErrMissingFile, env.Rank)
	}
	src := Source{Store: env.Store(data.Where), Name: data.Name, Size: data.Size, Digest: data.Digest}
	src.Image = res.OwnImage // the bytes as checked, or as restored and checked
	return src, nil
}

// ownInfo is this rank's data file for an L3 recovery. Under
// [Env.ImageLimit] it is checked here, read into memory as it is (each
// byte read once): the recovery takes the outcome instead of reading the
// file again, sends it from memory, and the Source returns the bytes.
func ownInfo(env *Env, data File) partner.FileInfo {
	fi := fileInfo(env.Store(data.Where), data, "")
	if wantImage(env, data) {
		fi.Image, fi.CheckErr = fi.CheckImage(env.Rank, env.BlockSize)
		fi.Checked = true
	}
	return fi
}

// RebuildOffline restores the lost or corrupted files of an L2
// checkpoint without a running job: local(n) is the local area of node n
// (as the manifest's topology numbers it). It returns the paths it wrote;
// ranks whose data file and copy are both gone are reported in an error
// wrapping [partner.ErrUnrecoverable].
func (Partner2) RebuildOffline(m *Manifest, topo *partner.Topology, local func(node int) Store, o partner.Options) ([]string, error) {
	own, held, err := offlineFiles(m, topo, local, RolePartner, topo.Left)
	if err != nil {
		return nil, err
	}
	res, err := partner.RebuildL2Offline(topo, o, own, held)
	return res.Paths, err
}

// offlineFiles lists, for an offline rebuild, every rank's data file and
// the file of the given role it holds of rank of(r), each in the local
// area of the rank's node; ranks the manifest lists no such file for get a
// zero FileInfo.
func offlineFiles(m *Manifest, topo *partner.Topology, local func(node int) Store, role string, of func(r int) int) (data, held []partner.FileInfo, err error) {
	if m.Ranks != topo.NumRanks() {
		return nil, nil, fmt.Errorf("%w: manifest has %d ranks, topology %d", ErrTopologyMismatch, m.Ranks, topo.NumRanks())
	}
	data = make([]partner.FileInfo, m.Ranks)
	held = make([]partner.FileInfo, m.Ranks)
	for r := range m.Ranks {
		s := local(topo.NodeOf(r))
		if f, ok := m.DataFile(r); ok {
			data[r] = fileInfo(s, f, "")
		}
		if f, ok := heldFile(m, r, role, of(r)); ok {
			held[r] = fileInfo(s, f, "")
		}
	}
	return data, held, nil
}
