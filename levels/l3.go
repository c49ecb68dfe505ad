package levels

import (
	"fmt"
	"strconv"

	"github.com/ftigo/ftigo/partner"
)

// L3 manifest attributes on parity files.
//
// wire format: never change — stored in manifests and read at recovery.
const (
	AttrRSK     = "rs-k"     // data shards (group size)
	AttrRSM     = "rs-m"     // parity shards
	AttrRSIndex = "rs-index" // parity shard held in this file
)

// RS3 is level 3: the data file on node-local storage plus Reed-Solomon
// parity across the rank's group (FTI's FTI_RSenc). With k group members
// and M parity shards (0 means M = k, FTI's tolerance: any k of the 2k
// files may be lost), group members 0..M-1 each hold one parity file
// (docs/format/parity.md), listed with role "parity". Encoding is
// distributed and pipelined (see [partner.EncodeGroup]); recovery rebuilds
// any M lost data or parity files of a group and refuses more.
type RS3 struct {
	// M is the number of parity files per group; 0 or more than the
	// group size means the group size.
	M int
	// Buffers, when not nil, recycles transfer blocks between checkpoints.
	Buffers *partner.Buffers
}

func (l RS3) options(env *Env) partner.Options {
	o := partnerOptions(env)
	o.Buffers = l.Buffers
	return o
}

// ID returns L3.
func (RS3) ID() ID { return L3 }

// DataArea returns Local.
func (RS3) DataArea() Where { return Local }

// Protect encodes the group's data files into parity. Collective.
func (l RS3) Protect(env *Env, p *Pending) error {
	if err := env.Topo.Validate(int(L3)); err != nil {
		return err
	}
	data := p.Data()
	name := RankFileName(p.Dir, RoleParity, env.Rank)
	to := partner.Ref{Driver: env.Local.Driver, Path: env.Local.Path(name) + TmpSuffix}
	par, err := partner.EncodeGroup(env.Comm, env.Topo, l.options(env), l.M, fileInfo(env.Store(data.Where), data, TmpSuffix), to)
	if err != nil {
		return fmt.Errorf("L3: %w", err)
	}
	if par.Held {
		p.Files = append(p.Files, File{Role: RoleParity, Where: Local, Name: name, Size: par.Size, Digest: Digest(par.Hash), Of: env.Rank,
			Attrs: map[string]string{
				AttrRSK:     strconv.Itoa(par.Header.K),
				AttrRSM:     strconv.Itoa(par.Header.M),
				AttrRSIndex: strconv.Itoa(par.Index),
			}})
	}
	return nil
}

// parityCount returns the parity count recorded in m (every rank reads the
// same manifest, so every rank agrees), or the level's own.
func (l RS3) parityCount(m *Manifest) int {
	for _, fs := range m.Files {
		for _, f := range fs {
			if f.Role == RoleParity {
				if v, err := strconv.Atoi(f.Attrs[AttrRSM]); err == nil && v > 0 {
					return v
				}
			}
		}
	}
	return l.M
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
	if okd {
		own = fileInfo(env.Store(data.Where), data, "")
	}
	if okp {
		pi = fileInfo(env.Store(par.Where), par, "")
	}
	if _, err := partner.RebuildGroup(env.Comm, env.Topo, l.options(env), l.parityCount(m), own, pi); err != nil {
		return Source{}, fmt.Errorf("L3: %w", err)
	}
	if !okd {
		return Source{}, fmt.Errorf("%w: manifest lists no data file for rank %d", ErrMissingFile, env.Rank)
	}
	return Source{Store: env.Store(data.Where), Name: data.Name, Size: data.Size, Digest: data.Digest}, nil
}

// RebuildOffline rebuilds the lost or corrupted files of an L3
// checkpoint without a running job: local(n) is the local area of node n.
// It returns the paths it wrote; groups that lost more than their parity
// count are reported in an error wrapping [partner.ErrUnrecoverable].
func (l RS3) RebuildOffline(m *Manifest, topo *partner.Topology, local func(node int) Store, o partner.Options) ([]string, error) {
	data, parity, err := offlineFiles(m, topo, local, RoleParity, func(r int) int { return r })
	if err != nil {
		return nil, err
	}
	res, err := partner.RebuildL3Offline(topo, o, l.parityCount(m), data, parity)
	return res.Paths, err
}
