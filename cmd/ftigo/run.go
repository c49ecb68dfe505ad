package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

const runFlagHelp = `A glbl_dir (and ckpt_dir) may hold the directories of several runs, each
named by its id (FTI's exec_id): the command lists them. It reads the run
meta_dir names, or with --run another one, from its manifest replicas in
glbl_dir/<run>/manifests (that run's markers are in its own meta_dir).
rebuild repairs only the run of the meta_dir it is given.`

const runArgHelp = `RUN is a run directory holding local/, global/ and meta/ (as heat2d -dir
writes it; a config.fti inside it takes precedence), or an FTI-style
config.fti naming ckpt_dir, glbl_dir and meta_dir. The command first prints
the directories it read, and the config.fti that named them.`

// loadRun turns a run directory or config file into the configuration
// whose directories the commands read. It refuses, naming the path, a RUN
// that is neither a directory nor a regular file (a FIFO would block), an
// empty file, and a configuration whose directories are missing or are
// not directories.
//
// It also returns the config.fti that named the directories ("" for a run
// directory's own local/, global/ and meta/).
func loadRun(arg string) (ckpt.Config, string, error) {
	cfg, err := loadRunDirs(arg)
	if err != nil {
		return cfg, "", err
	}
	var cfgFile string
	d := vfd.Sec2{}
	if st, err := d.Stat(arg); err == nil && !st.IsDir() {
		cfgFile = arg
	} else if _, err := d.Stat(filepath.Join(arg, "config.fti")); err == nil {
		cfgFile = filepath.Join(arg, "config.fti")
	}
	if abs, err := filepath.Abs(cfgFile); err == nil && cfgFile != "" {
		cfgFile = abs
	}
	return cfg, cfgFile, nil
}

func loadRunDirs(arg string) (ckpt.Config, error) {
	d := vfd.Sec2{}
	st, err := statPath(d, "RUN", arg)
	if err != nil {
		return ckpt.Config{}, err
	}
	switch {
	case st.IsDir():
		cfgFile := filepath.Join(arg, "config.fti")
		if _, err := d.Stat(cfgFile); err == nil {
			return loadRunConfig(cfgFile)
		}
		meta := filepath.Join(arg, "meta")
		if _, err := d.Stat(meta); errors.Is(err, fs.ErrNotExist) {
			return ckpt.Config{}, &pathError{"RUN", arg, "is not a run directory: it has neither meta/ nor config.fti", errNotDir}
		}
		if err := inputDir(d, "meta directory", meta); err != nil {
			return ckpt.Config{}, err
		}
		cfg := ckpt.DefaultConfig()
		cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(arg, "local"), filepath.Join(arg, "global"), meta
		cfg.LocalTest = true
		return cfg, nil
	case st.Mode().IsRegular():
		if st.Size() == 0 {
			return ckpt.Config{}, &pathError{"RUN", arg, "is an empty file: want a run directory or an FTI config.fti", errEmpty}
		}
		return loadRunConfig(arg)
	}
	return ckpt.Config{}, &pathError{"RUN", arg, "is " + kindOf(st.Mode()) + ": want a run directory or an FTI config.fti", vfd.ErrNotRegular}
}

// loadRunConfig reads an FTI config.fti and checks the directories it
// names: all three set, meta_dir a directory, the others directories or
// absent (a lost node-local directory is damage inspect reports).
func loadRunConfig(name string) (ckpt.Config, error) {
	d := vfd.Sec2{}
	if err := inputFile(d, "config", name, false); err != nil {
		return ckpt.Config{}, err
	}
	cfg, err := ckpt.LoadConfig(d, name)
	if err != nil {
		return ckpt.Config{}, err
	}
	for _, dir := range []struct{ key, path string }{{"ckpt_dir", cfg.CkptDir}, {"glbl_dir", cfg.GlblDir}, {"meta_dir", cfg.MetaDir}} {
		if dir.path == "" {
			return ckpt.Config{}, &pathError{"config", name, "names no " + dir.key + " (FTI's config.fti sets ckpt_dir, glbl_dir and meta_dir in [basic])", errNotDir}
		}
	}
	if err := inputDir(d, "meta_dir of "+name+":", cfg.MetaDir); err != nil {
		return ckpt.Config{}, err
	}
	for _, dir := range []struct{ key, path string }{{"ckpt_dir", cfg.CkptDir}, {"glbl_dir", cfg.GlblDir}} {
		if err := outputDir(d, dir.key+" of "+name+":", dir.path); err != nil {
			return ckpt.Config{}, err
		}
	}
	return cfg, nil
}

// runEntry is one checkpoint found in the run's metadata.
type runEntry struct {
	Name      string           `json:"name"`
	Committed bool             `json:"committed"`
	Manifest  *levels.Manifest `json:"-"`
	Err       string           `json:"error,omitempty"`
}

// filePath is where a manifest file held by rank holder lives: in the
// directories of the run that committed m.
func filePath(cfg ckpt.Config, m *levels.Manifest, holder int, f levels.File) (levels.Store, string) {
	var dir string
	switch f.Where {
	case levels.Local:
		dir = cfg.NodeDir(holder/max(m.NodeSize, 1), m.Run)
	case levels.Global:
		dir = cfg.GlobalDir(m.Run)
	default:
		dir = cfg.MetaDir
	}
	s := levels.Store{Driver: vfd.Sec2{}, Dir: dir}
	if cname, _, ok := levels.ContainerPath(f); ok && f.Attrs[levels.AttrInContainer] != "" {
		// The data exists only as the rank's task of the L4 container.
		s.Dir = cfg.GlobalDir(m.Run)
		return s, s.Path(cname)
	}
	return s, s.Path(f.Name)
}

// fileCheck is the result of checking one file of a checkpoint.
type fileCheck struct {
	Path   string `json:"path"`
	Role   string `json:"role"`
	Holder int    `json:"holder"`
	Of     int    `json:"of"`
	Size   int64  `json:"size"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
}

type ckptReport struct {
	Name      string `json:"name"`
	Seq       uint64 `json:"seq,omitempty"`
	ID        int64  `json:"id,omitempty"`
	Level     int    `json:"level,omitempty"`
	Ranks     int    `json:"ranks,omitempty"`
	Nodes     int    `json:"nodes,omitempty"`
	Bytes     int64  `json:"bytes,omitempty"`
	Time      string `json:"time,omitempty"`
	Committed bool   `json:"committed"`
	Present   int    `json:"files_present"`
	Files     int    `json:"files"`
	Status    string `json:"status"`
	Error     string `json:"error,omitempty"`
	// DCP describes a differential checkpoint (absent for a full one).
	DCP *dcpReport `json:"dcp,omitempty"`
	// Compressed describes a compressed checkpoint (absent otherwise).
	Compressed *compReport `json:"compressed,omitempty"`
	Checks     []fileCheck `json:"checks"`
}

// check looks at every file of m: presence and size only, or (full) the
// digest, and for data files the FTI-FF hashes of every chunk, so a
// mismatch names the rank, the variable and the offset.
//
// byseq holds the run's committed manifests, for the chains of
// differential checkpoints.
func check(cfg ckpt.Config, m *levels.Manifest, byseq map[uint64]*levels.Manifest, full bool, progress func()) []fileCheck {
	out := []fileCheck{}
	for holder, files := range m.Files {
		for _, f := range files {
			s, p := filePath(cfg, m, holder, f)
			c := fileCheck{Path: p, Role: f.Role, Holder: holder, Of: f.Of, Size: f.Size}
			var err error
			inTask := f.Attrs[levels.AttrInContainer] != ""
			if full {
				err = levels.VerifyFile(s, f)
				if err == nil && f.Role == "data" {
					err = verifyData(cfg, m, holder, f, byseq)
				}
			} else if inTask {
				// Present when the container holds the task with its size.
				var tf vfd.File
				if tf, err = levels.OpenTask(s, f); err == nil {
					err = tf.Close()
				}
			} else if st, serr := s.Driver.Stat(p); serr != nil {
				err = serr
			} else if !st.Mode().IsRegular() {
				err = fmt.Errorf("is %s, not a regular file: %w", kindOf(st.Mode()), vfd.ErrNotRegular)
			} else if st.Size() != f.Size {
				err = fmt.Errorf("size %d, manifest says %d", st.Size(), f.Size)
			}
			c.OK = err == nil
			if err != nil {
				c.Error = err.Error()
			}
			out = append(out, c)
			if progress != nil {
				progress()
			}
		}
	}
	return out
}

// report checks entry e of a run. run is the RUN argument, which the
// repair hint of a damaged checkpoint names.
func report(cfg ckpt.Config, e runEntry, byseq map[uint64]*levels.Manifest, full bool, progress func(), run string) ckptReport {
	r := ckptReport{Name: e.Name, Committed: e.Committed, Error: e.Err, Status: "not committed", Checks: []fileCheck{}}
	m := e.Manifest
	if m == nil {
		return r
	}
	r.Seq, r.ID, r.Level, r.Ranks, r.Nodes, r.Bytes = m.Seq, m.ID, int(m.Level), m.Ranks, len(m.Nodes), m.Bytes()
	r.Time = time.Unix(0, m.Time).UTC().Format(time.RFC3339)
	r.DCP = dcpOf(m)
	if e.Committed {
		r.Compressed = compOf(cfg, m, byseq)
	}
	r.Checks = check(cfg, m, byseq, full, progress)
	r.Files = len(r.Checks)
	for _, c := range r.Checks {
		if c.OK {
			r.Present++
		}
	}
	missing := missingLayers(m, byseq)
	switch {
	case missing != "":
		r.Status = "damaged: " + missing
	case r.Present == r.Files && full:
		r.Status = "verified"
	case r.Present == r.Files:
		r.Status = "complete"
	case m.Level == levels.L1:
		r.Status = "damaged: L1 has no redundancy"
	default:
		r.Status = fmt.Sprintf("damaged: %d of %d files bad; repair: ftigo rebuild --ckpt %s %s", r.Files-r.Present, r.Files, e.Name, shellWord(run))
	}
	return r
}

func countFiles(es []runEntry) int {
	n := 0
	for _, e := range es {
		if e.Manifest != nil {
			for _, fs := range e.Manifest.Files {
				n += len(fs)
			}
		}
	}
	return n
}

// runCommand builds inspect, verify or rebuild: one RUN argument, --run
// and --json.
func runCommand(name, short, long, example string, jsonOut *bool, do func(cmd *cobra.Command, cfg ckpt.Config, cfgFile string) error) *cobra.Command {
	var run string
	c := &cobra.Command{
		Use:     name + " RUN",
		Short:   short,
		Long:    long + "\n\n" + runArgHelp + "\n\n" + runFlagHelp,
		Example: example,
		Args:    argNames(false, "RUN"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, cfgFile, err := loadRun(args[0])
			if err != nil {
				return err
			}
			if run != "" {
				if err := levels.ValidRunID(run); err != nil {
					return usagef("--run: %v", err)
				}
				cfg.Run = run
			}
			return do(cmd, cfg, cfgFile)
		},
	}
	c.Flags().BoolVar(jsonOut, "json", false, "print the result as JSON")
	c.Flags().StringVar(&run, "run", "", "the run to read (an id listed under \"runs in glbl_dir\"); default: the run meta_dir names")
	return c
}

func (a *app) inspectCmd() *cobra.Command {
	var jsonOut bool
	return runCommand("inspect", "list the checkpoints of a run and check its metadata: id, level, ranks, sizes, committed, complete or damaged",
		`Says which directories it read (and the config.fti that named them), then
lists every checkpoint of the run: sequence, id, level, ranks, nodes, bytes,
commit time, whether it is committed, and whether its files are all present
with their recorded sizes (an L4 rank's data counts as present when the
container holds its task with that size; inspect does not re-hash: use
verify). A differential checkpoint is listed with the checkpoint it builds
on, its chain (the full base first) and the share of the data it wrote.
A compressed checkpoint is listed with its compression ratio (the
variable bytes it wrote and the bytes they take, from its manifest) and
each variable stored at reduced precision: its mode and the largest error
any rank's copy holds (read from the data files' metadata).

The metadata is checked as a restart reads it: both copies of every
manifest (meta_dir and glbl_dir/manifests), the markers, and the node table
(meta_dir/topology). A copy that is unreadable, damaged, another
checkpoint's (swapped), another run's (it disagrees with the other copy), or
missing beside a valid one, a checkpoint whose metadata is lost (files but
no valid copy), and a node table that does not parse or does not list the
newest checkpoint's nodes are listed as METADATA lines naming the file.

Exit codes: 0 the listing shows no error, 1 it shows one (a metadata
problem, or a checkpoint file missing or of the wrong size) or the run
could not be read, 2 usage error.`,
		`  ftigo inspect run
  ftigo inspect run --json
  ftigo inspect config.fti`, &jsonOut,
		func(cmd *cobra.Command, cfg ckpt.Config, cfgFile string) error {
			rs, err := scanRun(cfg, cfgFile)
			if err != nil {
				return err
			}
			res := inspectResult{Dirs: rs.dirs, Metadata: nonNil(rs.problems), Checkpoints: inspectRun(cfg, rs.entries, cmd.Flags().Arg(0))}
			res.OK = len(res.Metadata) == 0
			for _, r := range res.Checkpoints {
				if r.Committed && r.Present != r.Files || strings.HasPrefix(r.Status, "damaged") {
					res.OK = false
				}
			}
			if err := printInspect(a.stdout, cfg, res, jsonOut); err != nil {
				return err
			}
			if !res.OK {
				return exitStatus(1)
			}
			return nil
		})
}

// inspectResult is what inspect prints with --json.
type inspectResult struct {
	// OK is false when anything listed is an error.
	OK          bool          `json:"ok"`
	Dirs        runDirs       `json:"dirs"`
	Metadata    []metaProblem `json:"metadata"`
	Checkpoints []ckptReport  `json:"checkpoints"`
}

// inspectRun reports every entry of a run, checking presence and sizes.
func inspectRun(cfg ckpt.Config, es []runEntry, run string) []ckptReport {
	reps := make([]ckptReport, len(es))
	for i, e := range es {
		reps[i] = report(cfg, e, manifests(es), false, nil, run)
	}
	return reps
}

// printMetadata prints the directories read and the metadata problems.
func printMetadata(w io.Writer, dirs runDirs, problems []metaProblem) {
	fmt.Fprintln(w, dirs)
	for _, p := range problems {
		fmt.Fprintf(w, "METADATA %s: %s\n", p.Path, p.Problem)
	}
}

func printInspect(w io.Writer, cfg ckpt.Config, res inspectResult, jsonOut bool) error {
	if jsonOut {
		return writeJSON(w, res)
	}
	printMetadata(w, res.Dirs, res.Metadata)
	reps := res.Checkpoints
	if len(reps) == 0 {
		fmt.Fprintf(w, "no checkpoints in %s\n", cfg.MetaDir)
		return nil
	}
	fmt.Fprintf(w, "%-26s %4s %5s %5s %5s %10s %-20s %-9s %s\n", "manifest", "id", "level", "ranks", "nodes", "bytes", "committed at", "files", "status")
	for _, r := range reps {
		if r.Seq == 0 && !r.Committed {
			fmt.Fprintf(w, "%-26s %s\n", r.Name, r.Error)
			continue
		}
		fmt.Fprintf(w, "%-26s %4d %5s %5d %5d %10d %-20s %4d/%-4d %s\n", r.Name, r.ID, fmt.Sprintf("L%d", r.Level), r.Ranks, r.Nodes, r.Bytes, r.Time, r.Present, r.Files, r.Status)
		printDCP(w, r.DCP)
		printComp(w, r.Compressed)
		for _, c := range r.Checks {
			if !c.OK {
				fmt.Fprintf(w, "    missing or wrong size: %s (%s of rank %d): %s\n", c.Path, c.Role, c.Of, c.Error)
			}
		}
	}
	return nil
}

func (a *app) verifyCmd() *cobra.Command {
	var jsonOut bool
	return runCommand("verify", "check the metadata and re-hash every file of every committed checkpoint of a run",
		`Says which directories it read (and the config.fti that named them), checks
the run's metadata as inspect does (both manifest copies of every
checkpoint, the markers, the node table), then re-hashes every file of every
committed checkpoint (BLAKE3 digests from the manifest) and every chunk of
every data file (FTI-FF hashes); the data of an L4 checkpoint, which lives
only in its SIONlib container, is checked as each rank's task there. A
differential checkpoint's delta files are checked, and then the image each
rank's chain makes, block by block, against the image checksum in the
manifest. Prints the file, rank, variable and offset of each mismatch, and
a METADATA line naming each manifest copy or node table that is unreadable,
damaged, swapped, another run's or missing. On a terminal, a progress bar
counts the files on standard error.

Exit codes: 0 everything verifies, 1 anything does not, a metadata file
included (or there is no committed checkpoint to verify), 2 usage error.`,
		`  ftigo verify run
  ftigo verify run --json | jq .ok`, &jsonOut,
		func(cmd *cobra.Command, cfg ckpt.Config, cfgFile string) error {
			rs, err := scanRun(cfg, cfgFile)
			if err != nil {
				return err
			}
			return a.finishVerify(cfg, a.verifyRun(cfg, rs, jsonOut), jsonOut)
		})
}

// verifyResult is what verify and rebuild print with --json.
type verifyResult struct {
	OK bool `json:"ok"`
	// Dirs are the directories read.
	Dirs runDirs `json:"dirs"`
	// Metadata lists the metadata problems (each makes OK false).
	Metadata []metaProblem `json:"metadata"`
	// Rebuilt is the checkpoint a restart would use after rebuild (the
	// one named with --ckpt), rebuild only.
	Rebuilt *rebuiltCheckpoint `json:"rebuilt,omitempty"`
	// Rebuilds lists what rebuild did with each checkpoint (rebuild only).
	Rebuilds    []rebuildEntry `json:"rebuilds,omitempty"`
	Checkpoints []ckptReport   `json:"checkpoints"`
}

// rebuildEntry is one checkpoint's rebuild.
type rebuildEntry struct {
	Manifest string `json:"manifest"`
	ID       int64  `json:"id"`
	Level    int    `json:"level"`
	OK       bool   `json:"ok"`
	Restart  bool   `json:"restart,omitempty"`
	Error    string `json:"error,omitempty"`
}

// rebuiltCheckpoint names the checkpoint a restart would use after rebuild.
type rebuiltCheckpoint struct {
	Manifest string `json:"manifest"`
	ID       int64  `json:"id"`
	Level    int    `json:"level"`
}

// verifyRun verifies every committed entry of rs in full; OK is false when
// any file or metadata file fails or there is nothing to verify.
//
// With only set, just the checkpoints with those sequence numbers (their
// chains are still read from rs).
func (a *app) verifyRun(cfg ckpt.Config, rs *runScan, jsonOut bool, only ...uint64) verifyResult {
	es := rs.entries
	byseq := manifests(es)
	var sel []runEntry
	for _, e := range es {
		if e.Committed && (len(only) == 0 || (e.Manifest != nil && slices.Contains(only, e.Manifest.Seq))) {
			sel = append(sel, e)
		}
	}
	p := a.newProgress(jsonOut, "verify", int64(countFiles(sel)), false)
	defer p.Done()
	res := verifyResult{OK: len(rs.problems) == 0, Dirs: rs.dirs, Metadata: nonNil(rs.problems), Checkpoints: []ckptReport{}}
	for _, e := range sel {
		r := report(cfg, e, byseq, true, func() { p.Add(1) }, "")
		if r.Status != "verified" {
			res.OK = false
		}
		res.Checkpoints = append(res.Checkpoints, r)
	}
	if len(res.Checkpoints) == 0 {
		res.OK = false
	}
	return res
}

// finishVerify prints res and ends with exit status 1 when it is not OK.
func (a *app) finishVerify(cfg ckpt.Config, res verifyResult, jsonOut bool) error {
	if jsonOut {
		if err := writeJSON(a.stdout, res); err != nil {
			return err
		}
	} else {
		w := a.stdout
		printMetadata(w, res.Dirs, res.Metadata)
		for _, r := range res.Rebuilds {
			switch {
			case !r.OK:
				fmt.Fprintf(w, "NOT REBUILT checkpoint %d (L%d, %s): %s\n", r.ID, r.Level, r.Manifest, r.Error)
			case r.Restart:
				fmt.Fprintf(w, "rebuilt checkpoint %d (L%d, %s): a restart would use it\n", r.ID, r.Level, r.Manifest)
			default:
				fmt.Fprintf(w, "rebuilt checkpoint %d (L%d, %s)\n", r.ID, r.Level, r.Manifest)
			}
		}
		if len(res.Checkpoints) == 0 {
			fmt.Fprintf(w, "no committed checkpoint in %s\n", cfg.MetaDir)
		}
		for _, r := range res.Checkpoints {
			fmt.Fprintf(w, "%s id %d L%d: %d/%d files verified\n", r.Name, r.ID, r.Level, r.Present, r.Files)
			printDCP(w, r.DCP)
			printComp(w, r.Compressed)
			for _, c := range r.Checks {
				if !c.OK {
					fmt.Fprintf(w, "  FAIL %s (%s of rank %d): %s\n", c.Path, c.Role, c.Of, c.Error)
				}
			}
		}
	}
	if !res.OK {
		return exitStatus(1)
	}
	return nil
}

func (a *app) rebuildCmd() *cobra.Command {
	var jsonOut bool
	var only string
	c := runCommand("rebuild", "rebuild lost L2/L3/L4 files of a run offline, then verify",
		`Rebuilds every committed checkpoint of a job that is not running, newest
first (with --ckpt, only the one named as inspect lists it): lost or
corrupted files are reconstructed from the surviving L2 partner copies, L3
Reed-Solomon parity or the L4 container, exactly as a restart would (a
damaged or missing manifest copy is rewritten from the valid one). Then the
checkpoints rebuilt and the run's metadata are verified. Each checkpoint
gets a line: rebuilt (and which one a restart would use), or NOT REBUILT
with the reason. On a terminal, standard error shows the rebuild's elapsed
time and then a progress bar of the verification.

Exit codes: 0 every checkpoint is rebuilt and verifies, 1 one stays damaged
(or nothing could be rebuilt, or it does not verify), 2 usage error.`,
		`  ftigo rebuild run
  ftigo rebuild --ckpt ckpt00000002.manifest run
  ftigo rebuild config.fti --json`, &jsonOut,
		func(cmd *cobra.Command, cfg ckpt.Config, cfgFile string) error {
			if err := rebuildRunCheck(cfg); err != nil {
				return err
			}
			seq, err := ckptArg(only)
			if err != nil {
				return err
			}
			act := a.startActivity(jsonOut, "rebuild: reconstructing and checking checkpoint files")
			reps, err := ckpt.RebuildCheckpointsOffline(cfg, seq)
			if err != nil {
				act.Stop("failed")
				return err
			}
			act.Stop("done")
			var failed []ckpt.RebuildReport
			for _, r := range reps {
				if r.Err != nil {
					failed = append(failed, r)
				}
			}
			if len(failed) == len(reps) {
				// Nothing rebuilt: the reason, as for any failed command.
				errs := make([]error, len(failed))
				for i, r := range failed {
					errs[i] = fmt.Errorf("%s (id %d, L%d): %w", levels.ManifestName(r.Checkpoint.Seq), r.Checkpoint.ID, r.Checkpoint.Level, r.Err)
				}
				return errors.Join(errs...)
			}
			rs, err := scanRun(cfg, cfgFile)
			if err != nil {
				return err
			}
			var ok []uint64
			res := verifyResult{Rebuilds: []rebuildEntry{}}
			for _, r := range reps {
				e := rebuildEntry{Manifest: levels.ManifestName(r.Checkpoint.Seq), ID: r.Checkpoint.ID, Level: int(r.Checkpoint.Level), Restart: r.Restart, OK: r.Err == nil}
				if r.Err != nil {
					e.Error = r.Err.Error()
				} else {
					ok = append(ok, r.Checkpoint.Seq)
				}
				if r.Restart || (seq != 0 && r.Err == nil) {
					res.Rebuilt = &rebuiltCheckpoint{Manifest: e.Manifest, ID: e.ID, Level: e.Level}
				}
				res.Rebuilds = append(res.Rebuilds, e)
			}
			v := a.verifyRun(cfg, rs, jsonOut, ok...)
			v.Rebuilt, v.Rebuilds = res.Rebuilt, res.Rebuilds
			v.OK = v.OK && len(failed) == 0
			return a.finishVerify(cfg, v, jsonOut)
		})
	c.Flags().StringVar(&only, "ckpt", "", "rebuild only this checkpoint: its manifest name as inspect lists it (ckpt00000002.manifest) or its sequence number")
	return c
}

// ckptArg reads --ckpt: a manifest name or a sequence number (0: every
// checkpoint).
func ckptArg(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	num := strings.TrimSuffix(strings.TrimPrefix(s, "ckpt"), ".manifest")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 || (num != s && levels.ManifestName(n) != s) {
		return 0, usagef("--ckpt %q: want a manifest name as inspect lists it (%s) or a sequence number", s, levels.ManifestName(1))
	}
	return n, nil
}

// shellWord returns s as one word of a POSIX shell command line.
func shellWord(s string) string {
	safe := s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+,:=@%") == ""
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// rebuildRunCheck refuses rebuild --run for a run other than the one
// meta_dir names: a rebuild repairs a run's metadata in its meta_dir.
func rebuildRunCheck(cfg ckpt.Config) error {
	if cfg.Run == "" {
		return nil
	}
	own, ok, err := levels.ReadRun(levels.Store{Driver: vfd.Sec2{}, Dir: cfg.MetaDir})
	if err != nil || !ok || own == cfg.Run {
		return err
	}
	return fmt.Errorf("rebuild --run %s: meta_dir %s belongs to run %s; rebuild repairs the run of the meta_dir it is given: give it the configuration of the job that owns run %s (inspect and verify read any run)",
		cfg.Run, cfg.MetaDir, own, cfg.Run)
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// nonNil returns s, or an empty slice for nil, so JSON shows [] and never null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
