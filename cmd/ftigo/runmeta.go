package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"time"

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
	// Run is the run read ("" for one from before run ids); MetaRun the
	// one meta_dir names ("" for none).
	Run     string `json:"run"`
	MetaRun string `json:"meta_dir_run"`
	// Global is the run's directory in glbl_dir.
	Global string `json:"glbl_dir"`
	// Replicas is the directory of the manifest replicas.
	Replicas string `json:"replicas"`
	Local    string `json:"ckpt_dir"`
	// Nodes are the node directories found under Local.
	Nodes []string `json:"nodes"`
	// Runs are the runs found in glbl_dir.
	Runs []runInfo `json:"runs"`
}

// runInfo is a run found in glbl_dir.
type runInfo struct {
	// ID is the run's id, "" for the checkpoints of a run from before
	// run ids (glbl_dir/manifests).
	ID string `json:"id"`
	// Checkpoints counts its manifest replicas; Newest is the commit time
	// of the newest one.
	Checkpoints int    `json:"checkpoints"`
	Newest      string `json:"newest,omitempty"`
}

func (d runDirs) String() string {
	var b strings.Builder
	if d.Config != "" {
		fmt.Fprintf(&b, "directories named by %s\n", d.Config)
	}
	switch {
	case d.Run == "":
		b.WriteString("run: from before run ids (flat directories)\n")
	case d.Run == d.MetaRun:
		fmt.Fprintf(&b, "run %s (named by meta_dir)\n", d.Run)
	case d.MetaRun == "":
		fmt.Fprintf(&b, "run %s (read from its manifest replicas; meta_dir names no run)\n", d.Run)
	default:
		fmt.Fprintf(&b, "run %s (read from its manifest replicas; meta_dir names run %s)\n", d.Run, d.MetaRun)
	}
	fmt.Fprintf(&b, "checked: meta_dir %s, glbl_dir %s (manifest replicas in %s), ckpt_dir %s", d.Meta, d.Global, d.Replicas, d.Local)
	if len(d.Nodes) == 0 {
		b.WriteString(" (no node directories)")
	} else {
		fmt.Fprintf(&b, " (%d node directories: %s)", len(d.Nodes), strings.Join(d.Nodes, ", "))
	}
	if len(d.Runs) > 0 {
		b.WriteString("\nruns in glbl_dir:")
		for _, r := range d.Runs {
			id := r.ID
			if id == "" {
				id = "(from before run ids)"
			}
			mark := ""
			if r.ID == d.Run {
				mark = ", listed below"
			}
			fmt.Fprintf(&b, "\n  %s: %d checkpoint(s)", id, r.Checkpoints)
			if r.Newest != "" {
				fmt.Fprintf(&b, ", newest committed %s", r.Newest)
			}
			b.WriteString(mark)
		}
	}
	return b.String()
}

// listRuns returns the runs found in glbl_dir: the run directories, and
// the replicas of a run from before run ids.
func listRuns(d vfd.Driver, glbl string) ([]runInfo, error) {
	g := levels.Store{Driver: d, Dir: glbl}
	ids, err := levels.ListRuns(g)
	if err != nil {
		return nil, err
	}
	if st, err := d.Stat(g.Path(levels.ReplicaDir)); err == nil && st.IsDir() {
		ids = append([]string{""}, ids...)
	}
	var out []runInfo
	for _, id := range ids {
		ri := runInfo{ID: id}
		ms, err := levels.ScanManifests(levels.Store{Driver: d, Dir: filepath.Join(levels.RunDir(glbl, id), levels.ReplicaDir)})
		if err != nil {
			return nil, err
		}
		ri.Checkpoints = len(ms)
		for i := len(ms) - 1; i >= 0; i-- {
			if ms[i].M != nil {
				ri.Newest = time.Unix(0, ms[i].M.Time).UTC().Format(time.RFC3339)
				break
			}
		}
		out = append(out, ri)
	}
	return out, nil
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
//
// The run is the one meta_dir names, or cfg.Run. Another run than
// meta_dir's is read from its manifest replicas alone.
func scanRun(cfg ckpt.Config, cfgFile string) (*runScan, error) {
	d := vfd.Sec2{}
	meta := levels.Store{Driver: d, Dir: cfg.MetaDir}
	own, _, err := levels.ReadRun(meta)
	if err != nil {
		return nil, err
	}
	runs, err := listRuns(d, cfg.GlblDir)
	if err != nil {
		return nil, err
	}
	run := own
	if cfg.Run != "" && cfg.Run != own {
		run = cfg.Run
		if !slices.ContainsFunc(runs, func(r runInfo) bool { return r.ID == run }) {
			ids := make([]string, 0, len(runs))
			for _, r := range runs {
				ids = append(ids, cmp.Or(r.ID, "(from before run ids)"))
			}
			return nil, fmt.Errorf("glbl_dir %s holds no run %s (runs found: %s)", cfg.GlblDir, run, cmp.Or(strings.Join(ids, ", "), "none"))
		}
		meta = levels.Store{Driver: d, Dir: filepath.Join(cfg.GlobalDir(run), levels.ReplicaDir)}
	}
	rs := &runScan{dirs: runDirs{Config: cfgFile, Meta: cfg.MetaDir, Run: run, MetaRun: own, Global: cfg.GlobalDir(run),
		Replicas: filepath.Join(cfg.GlobalDir(run), levels.ReplicaDir), Local: cfg.CkptDir, Nodes: []string{}, Runs: nonNil(runs)}}
	var locals []levels.Store
	ents, err := d.ReadDir(cfg.CkptDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list ckpt_dir: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() {
			rs.dirs.Nodes = append(rs.dirs.Nodes, e.Name())
			locals = append(locals, levels.Store{Driver: d, Dir: levels.RunDir(filepath.Join(cfg.CkptDir, e.Name()), run)})
		}
	}
	scan, err := levels.ScanRun(run, meta, levels.Store{Driver: d, Dir: cfg.GlobalDir(run)}, locals...)
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
				why := "not committed (interrupted while being written: an intent marker; a restart removes it)"
				if len(s.PendingNodes) > 0 {
					names := make([]string, len(s.PendingNodes))
					for i, r := range s.PendingNodes {
						names[i] = r.String()
					}
					why = "not committed (interrupted while being written: an intent marker naming " + strings.Join(names, ", ") +
						"; a restart removes its files on the nodes it has, the marker once none is left)"
				}
				rs.entries = append(rs.entries, runEntry{Name: name, Err: why})
			}
		}
	}
	if p := checkTopology(d, cfg.MetaDir, newest); run == own && p != nil {
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
