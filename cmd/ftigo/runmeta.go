package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// runDirs says which directories inspect, verify and rebuild read.
type runDirs struct {
	// Config is the config.fti that named the directories ("" for a run
	// directory's local/, global/ and meta/).
	Config string `json:"config,omitempty"`
	Meta   string `json:"meta_dir"`
	Global string `json:"glbl_dir"`
	// Replicas is the directory of the manifest replicas.
	Replicas string `json:"replicas"`
	Local    string `json:"ckpt_dir"`
	// Nodes are the node directories found under Local.
	Nodes []string `json:"nodes"`
}

func (d runDirs) String() string {
	var b strings.Builder
	if d.Config != "" {
		fmt.Fprintf(&b, "directories named by %s\n", d.Config)
	}
	fmt.Fprintf(&b, "checked: meta_dir %s, glbl_dir %s (manifest replicas in %s), ckpt_dir %s", d.Meta, d.Global, d.Replicas, d.Local)
	if len(d.Nodes) == 0 {
		b.WriteString(" (no node directories)")
	} else {
		fmt.Fprintf(&b, " (%d node directories: %s)", len(d.Nodes), strings.Join(d.Nodes, ", "))
	}
	return b.String()
}

// metaProblem is a metadata file that is not as a restart needs it: a
// damaged, unreadable, foreign (another checkpoint's or another run's)
// or missing manifest copy, a checkpoint whose metadata is lost, or a
// bad node table.
type metaProblem struct {
	Path    string `json:"path"`
	Problem string `json:"problem"`
}

// runScan is what inspect, verify and rebuild know of a run.
type runScan struct {
	dirs     runDirs
	entries  []runEntry
	problems []metaProblem
}

// maxTopologySize bounds the node table read (as the runtime does).
const maxTopologySize = 16 << 20

// scanRun reads a run's metadata the way a restart does
// (levels.ScanCheckpoints over the meta area, the global area with its
// manifest replicas, and every node directory of the local area) and
// lists its checkpoints and its metadata problems.
func scanRun(cfg ckpt.Config, cfgFile string) (*runScan, error) {
	d := vfd.Sec2{}
	rs := &runScan{dirs: runDirs{Config: cfgFile, Meta: cfg.MetaDir, Global: cfg.GlblDir,
		Replicas: filepath.Join(cfg.GlblDir, levels.ReplicaDir), Local: cfg.CkptDir, Nodes: []string{}}}
	var locals []levels.Store
	ents, err := d.ReadDir(cfg.CkptDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list ckpt_dir: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			rs.dirs.Nodes = append(rs.dirs.Nodes, e.Name())
			locals = append(locals, levels.Store{Driver: d, Dir: filepath.Join(cfg.CkptDir, e.Name())})
		}
	}
	meta := levels.Store{Driver: d, Dir: cfg.MetaDir}
	scan, err := levels.ScanCheckpoints(meta, levels.Store{Driver: d, Dir: cfg.GlblDir}, locals...)
	if err != nil {
		return nil, err
	}
	var newest *levels.Manifest
	for i := range scan {
		s := &scan[i]
		name := levels.ManifestName(s.Seq)
		for _, b := range s.Broken {
			rs.entries = append(rs.entries, runEntry{Name: filepath.Base(b), Err: "not committed (broken)"})
		}
		for _, l := range s.Leftovers {
			if strings.HasSuffix(l, levels.ManifestName(s.Seq)+levels.TmpSuffix) {
				rs.entries = append(rs.entries, runEntry{Name: filepath.Base(l), Err: "not committed (tmp)"})
			}
		}
		switch s.State() {
		case levels.SeqCommitted:
			good := s.Valid()
			rs.entries = append(rs.entries, runEntry{Name: name, Committed: true, Manifest: good.M})
			newest = good.M
			for _, c := range []*levels.ManifestCopy{&s.Primary, &s.Replica} {
				switch {
				case c == good:
				case c.State == levels.CopyMissing:
					rs.problems = append(rs.problems, metaProblem{c.Path, fmt.Sprintf("missing: %s has one manifest copy left (%s); a restart rewrites this one", levels.CheckpointDir(s.Seq), good.Path)})
				case c.State != levels.CopyValid:
					rs.problems = append(rs.problems, metaProblem{c.Path, fmt.Sprintf("%s: %v (a restart moves it aside and uses %s)", c.State, c.Err, good.Path)})
				case !levels.SameCheckpoint(c.M, good.M):
					// Which one is foreign only the data can tell: both are named.
					why := "both are valid manifests of %s but describe different checkpoints: one is another run's (a restart uses %s; verify's file checks show whether its files match)"
					rs.problems = append(rs.problems,
						metaProblem{good.Path, fmt.Sprintf("disagrees with %s: "+why, c.Path, levels.CheckpointDir(s.Seq), good.Path)},
						metaProblem{c.Path, fmt.Sprintf("disagrees with %s: "+why, good.Path, levels.CheckpointDir(s.Seq), good.Path)})
				}
			}
		case levels.SeqLost:
			err := levels.LostError([]levels.SeqScan{*s})
			rs.entries = append(rs.entries, runEntry{Name: name, Err: err.Error()})
			rs.problems = append(rs.problems, metaProblem{s.Primary.Path, err.Error()})
		case levels.SeqDeleting:
			// Listed while files remain (a finished deletion leaves only
			// the marker until the next commit).
			if len(s.Files)+s.MoreFiles == 0 {
				continue
			}
			why := "a deletion marker"
			if s.Deleting == "" {
				why = fmt.Sprintf("superseded by %s", levels.CheckpointDir(s.SupersededBy))
			}
			rs.entries = append(rs.entries, runEntry{Name: name, Err: "not committed (being deleted: " + why + "; a restart finishes the deletion)"})
		default:
			if s.Pending != "" && len(s.Files)+s.MoreFiles+len(s.Leftovers) == 0 &&
				s.Primary.State == levels.CopyMissing && s.Replica.State == levels.CopyMissing {
				continue // the next checkpoint's intent marker, written ahead: nothing was written yet
			}
			if s.Pending != "" || s.Primary.State != levels.CopyMissing || s.Replica.State != levels.CopyMissing {
				rs.entries = append(rs.entries, runEntry{Name: name, Err: "not committed (interrupted while being written: an intent marker; a restart removes it)"})
			}
		}
	}
	if p := checkTopology(d, cfg.MetaDir, newest); p != nil {
		rs.problems = append(rs.problems, *p)
	}
	slices.SortStableFunc(rs.entries, func(a, b runEntry) int { return strings.Compare(a.Name, b.Name) })
	return rs, nil
}

// checkTopology checks the node table meta_dir/topology: a regular
// file that parses and, when a checkpoint is committed, lists the nodes
// of the newest one. A missing table is no problem (Init writes it).
func checkTopology(d vfd.Driver, metaDir string, newest *levels.Manifest) *metaProblem {
	name := filepath.Join(metaDir, "topology")
	raw, err := vfd.ReadFileLimit(d, name, maxTopologySize)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &metaProblem{name, "unreadable node table: " + err.Error()}
	}
	table, err := partner.UnmarshalTable(raw)
	if err != nil {
		return &metaProblem{name, "damaged node table: " + err.Error()}
	}
	if newest != nil && !slices.Equal([]string(table), newest.Nodes) {
		return &metaProblem{name, fmt.Sprintf("the node table lists %d nodes (%s), the newest checkpoint %s %d (%s): another run's table or a damaged one (or a restart on other nodes that has not committed a checkpoint yet)",
			len(table), abbrev(table), levels.CheckpointDir(newest.Seq), len(newest.Nodes), abbrev(newest.Nodes))}
	}
	return nil
}

func abbrev(s []string) string {
	if len(s) > 6 {
		return strings.Join(s[:6], ", ") + fmt.Sprintf(" and %d more", len(s)-6)
	}
	return strings.Join(s, ", ")
}
