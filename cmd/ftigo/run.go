package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/levels"
	"github.com/ftigo/ftigo/vfd"
)

func init() {
	register(command{name: "inspect", summary: "list the checkpoints of a run: id, level, ranks, sizes, committed, recoverable", run: runInspect})
	register(command{name: "verify", summary: "re-hash every file of every committed checkpoint of a run", run: runVerify})
	register(command{name: "rebuild", summary: "rebuild lost L2/L3/L4 files of a run offline, then verify", run: runRebuild})
}

const runArgHelp = `RUN is a run directory holding local/, global/ and meta/ (as heat2d -dir
writes it), or an FTI-style config.fti naming ckpt_dir, glbl_dir and meta_dir.`

// loadRun turns a run directory or config file into the configuration
// whose directories the commands read.
func loadRun(arg string) (ckpt.Config, error) {
	st, err := os.Stat(arg)
	if err != nil {
		return ckpt.Config{}, err
	}
	if !st.IsDir() {
		return ckpt.LoadConfig(vfd.Sec2{}, arg)
	}
	if cfgFile := filepath.Join(arg, "config.fti"); fileExists(cfgFile) {
		return ckpt.LoadConfig(vfd.Sec2{}, cfgFile)
	}
	if !fileExists(filepath.Join(arg, "meta")) {
		return ckpt.Config{}, fmt.Errorf("%s is not a run directory: it has neither meta/ nor config.fti", arg)
	}
	cfg := ckpt.DefaultConfig()
	cfg.CkptDir, cfg.GlblDir, cfg.MetaDir = filepath.Join(arg, "local"), filepath.Join(arg, "global"), filepath.Join(arg, "meta")
	cfg.LocalTest = true
	return cfg, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// runEntry is one checkpoint found in the meta directory.
type runEntry struct {
	Name      string           `json:"name"`
	Committed bool             `json:"committed"`
	Manifest  *levels.Manifest `json:"-"`
	Err       string           `json:"error,omitempty"`
}

// listRun reads every manifest (committed, broken or half-written) in
// the meta directory, oldest first.
func listRun(cfg ckpt.Config) ([]runEntry, error) {
	ents, err := os.ReadDir(cfg.MetaDir)
	if err != nil {
		return nil, err
	}
	var out []runEntry
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, ".manifest"):
			b, err := os.ReadFile(filepath.Join(cfg.MetaDir, n))
			if err != nil {
				out = append(out, runEntry{Name: n, Err: err.Error()})
				continue
			}
			m, err := levels.ParseManifest(filepath.Join(cfg.MetaDir, n), b)
			if err != nil {
				out = append(out, runEntry{Name: n, Err: err.Error()})
				continue
			}
			out = append(out, runEntry{Name: n, Committed: true, Manifest: m})
		case strings.HasSuffix(n, ".manifest.broken"), strings.HasSuffix(n, ".manifest.tmp"):
			out = append(out, runEntry{Name: n, Err: "not committed (" + filepath.Ext(n)[1:] + ")"})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// filePath is where a manifest file held by rank holder lives.
func filePath(cfg ckpt.Config, m *levels.Manifest, holder int, f levels.File) (levels.Store, string) {
	var dir string
	switch f.Where {
	case levels.Local:
		dir = filepath.Join(cfg.CkptDir, fmt.Sprintf("node%04d", holder/max(m.NodeSize, 1)))
	case levels.Global:
		dir = cfg.GlblDir
	default:
		dir = cfg.MetaDir
	}
	s := levels.Store{Driver: vfd.Sec2{}, Dir: dir}
	if cname, _, ok := levels.ContainerPath(f); ok && f.Attrs[levels.AttrInContainer] != "" {
		// The data exists only as the rank's task of the L4 container.
		s.Dir = cfg.GlblDir
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
	Name      string      `json:"name"`
	Seq       uint64      `json:"seq,omitempty"`
	ID        int64       `json:"id,omitempty"`
	Level     int         `json:"level,omitempty"`
	Ranks     int         `json:"ranks,omitempty"`
	Nodes     int         `json:"nodes,omitempty"`
	Bytes     int64       `json:"bytes,omitempty"`
	Time      string      `json:"time,omitempty"`
	Committed bool        `json:"committed"`
	Present   int         `json:"files_present"`
	Files     int         `json:"files"`
	Status    string      `json:"status"`
	Error     string      `json:"error,omitempty"`
	Checks    []fileCheck `json:"checks,omitempty"`
}

// check looks at every file of m: presence and size only, or (full) the
// digest, and for data files the FTI-FF hashes of every chunk, so a
// mismatch names the rank, the variable and the offset.
func check(cfg ckpt.Config, m *levels.Manifest, full bool, progress func()) []fileCheck {
	var out []fileCheck
	for holder, files := range m.Files {
		for _, f := range files {
			s, p := filePath(cfg, m, holder, f)
			c := fileCheck{Path: p, Role: f.Role, Holder: holder, Of: f.Of, Size: f.Size}
			var err error
			inTask := f.Attrs[levels.AttrInContainer] != ""
			if full {
				err = levels.VerifyFile(s, f)
				if err == nil && f.Role == "data" {
					err = verifyFTIFF(s, f)
				}
			} else if inTask {
				// Present when the container holds the task with its size.
				var tf vfd.File
				if tf, err = levels.OpenTask(s, f); err == nil {
					err = tf.Close()
				}
			} else if st, serr := os.Stat(p); serr != nil {
				err = serr
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

// verifyFTIFF re-reads a data file chunk by chunk: the local file, or the
// rank's task of the L4 container for an entry that lives only there.
func verifyFTIFF(s levels.Store, df levels.File) error {
	var f vfd.File
	var err error
	if df.Attrs[levels.AttrInContainer] != "" {
		f, err = levels.OpenTask(s, df)
	} else {
		f, err = vfd.OpenRead(s.Driver, s.Path(df.Name))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := fileformat.Open(f)
	if err != nil {
		return err
	}
	return r.Verify()
}

func report(cfg ckpt.Config, e runEntry, full bool, progress func()) ckptReport {
	r := ckptReport{Name: e.Name, Committed: e.Committed, Error: e.Err, Status: "not committed"}
	m := e.Manifest
	if m == nil {
		return r
	}
	r.Seq, r.ID, r.Level, r.Ranks, r.Nodes, r.Bytes = m.Seq, m.ID, int(m.Level), m.Ranks, len(m.Nodes), m.Bytes()
	r.Time = time.Unix(0, m.Time).UTC().Format(time.RFC3339)
	r.Checks = check(cfg, m, full, progress)
	r.Files = len(r.Checks)
	for _, c := range r.Checks {
		if c.OK {
			r.Present++
		}
	}
	switch {
	case r.Present == r.Files && full:
		r.Status = "verified"
	case r.Present == r.Files:
		r.Status = "complete"
	case m.Level == levels.L1:
		r.Status = "damaged: L1 has no redundancy"
	default:
		r.Status = fmt.Sprintf("damaged: %d of %d files bad; try ftigo rebuild", r.Files-r.Present, r.Files)
	}
	return r
}

// progressBar returns a function printing "label n/total" to w when w is
// a terminal, and nil otherwise.
func progressBar(w io.Writer, label string, total int) (tick func(), done func()) {
	f, ok := w.(*os.File)
	if !ok {
		return nil, func() {}
	}
	if st, err := f.Stat(); err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil, func() {}
	}
	n := 0
	tick = func() {
		n++
		width := 30
		fill := width * n / max(total, 1)
		fmt.Fprintf(f, "\r%s [%s%s] %d/%d", label, strings.Repeat("#", fill), strings.Repeat(".", width-fill), n, total)
	}
	return tick, func() { fmt.Fprintln(f) }
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

func runFlags(name, usage string, stderr io.Writer) (*flag.FlagSet, *bool) {
	fs := flag.NewFlagSet("ftigo "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	jsonOut := fs.Bool("json", false, "print the result as JSON")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ftigo %s [--json] RUN\n\n%s\n\n%s\n\nFlags:\n", name, usage, runArgHelp)
		fs.PrintDefaults()
	}
	return fs, jsonOut
}

func parseRunArgs(fs *flag.FlagSet, args []string) (ckpt.Config, int, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ckpt.Config{}, 0, err
		}
		return ckpt.Config{}, 2, err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return ckpt.Config{}, 2, errors.New("want exactly one RUN argument")
	}
	cfg, err := loadRun(fs.Arg(0))
	if err != nil {
		return cfg, 1, err
	}
	return cfg, 0, nil
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs, jsonOut := runFlags("inspect", `Lists every checkpoint under the run's meta directory: sequence, id, level,
ranks, nodes, bytes, commit time, whether it is committed, and whether its
files are all present with their recorded sizes (an L4 rank's data counts as
present when the container holds its task with that size; inspect does not
re-hash; use verify). Exit 0 when the listing succeeded.

Example:
  ftigo inspect /tmp/heat2d-123
  ftigo inspect --json config.fti`, stderr)
	cfg, code, err := parseRunArgs(fs, args)
	if err != nil {
		if code != 0 {
			fmt.Fprintln(stderr, "ftigo inspect:", err)
		}
		return code
	}
	es, err := listRun(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ftigo inspect:", err)
		return 1
	}
	reps := make([]ckptReport, len(es))
	for i, e := range es {
		reps[i] = report(cfg, e, false, nil)
	}
	if *jsonOut {
		return writeJSON(stdout, stderr, reps)
	}
	if len(reps) == 0 {
		fmt.Fprintf(stdout, "no checkpoints in %s\n", cfg.MetaDir)
		return 0
	}
	fmt.Fprintf(stdout, "%-26s %4s %5s %5s %5s %10s %-20s %-9s %s\n", "manifest", "id", "level", "ranks", "nodes", "bytes", "committed at", "files", "status")
	for _, r := range reps {
		if r.Seq == 0 && !r.Committed {
			fmt.Fprintf(stdout, "%-26s %s\n", r.Name, r.Error)
			continue
		}
		fmt.Fprintf(stdout, "%-26s %4d %5s %5d %5d %10d %-20s %4d/%-4d %s\n", r.Name, r.ID, fmt.Sprintf("L%d", r.Level), r.Ranks, r.Nodes, r.Bytes, r.Time, r.Present, r.Files, r.Status)
		for _, c := range r.Checks {
			if !c.OK {
				fmt.Fprintf(stdout, "    missing or wrong size: %s (%s of rank %d): %s\n", c.Path, c.Role, c.Of, c.Error)
			}
		}
	}
	return 0
}

func runVerify(args []string, stdout, stderr io.Writer) int {
	fs, jsonOut := runFlags("verify", `Re-hashes every file of every committed checkpoint (BLAKE3 digests from the
manifest) and every chunk of every data file (FTI-FF hashes); the data of an
L4 checkpoint, which lives only in its SIONlib container, is checked as each
rank's task there. Prints the file, rank, variable and offset of each
mismatch. Exit 0 when everything
verifies, 1 when anything does not (or there is nothing to verify).

Example:
  ftigo verify /tmp/heat2d-123`, stderr)
	cfg, code, err := parseRunArgs(fs, args)
	if err != nil {
		if code != 0 {
			fmt.Fprintln(stderr, "ftigo verify:", err)
		}
		return code
	}
	es, err := listRun(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ftigo verify:", err)
		return 1
	}
	return verifyEntries(cfg, es, *jsonOut, stdout, stderr)
}

func verifyEntries(cfg ckpt.Config, es []runEntry, jsonOut bool, stdout, stderr io.Writer) int {
	tick, done := progressBar(stderr, "verify", countFiles(es))
	var reps []ckptReport
	ok := true
	for _, e := range es {
		if !e.Committed {
			continue
		}
		r := report(cfg, e, true, tick)
		if r.Status != "verified" {
			ok = false
		}
		reps = append(reps, r)
	}
	done()
	if len(reps) == 0 {
		ok = false
	}
	if jsonOut {
		if c := writeJSON(stdout, stderr, map[string]any{"ok": ok, "checkpoints": reps}); c != 0 {
			return c
		}
	} else {
		if len(reps) == 0 {
			fmt.Fprintf(stdout, "no committed checkpoint in %s\n", cfg.MetaDir)
		}
		for _, r := range reps {
			fmt.Fprintf(stdout, "%s id %d L%d: %d/%d files verified\n", r.Name, r.ID, r.Level, r.Present, r.Files)
			for _, c := range r.Checks {
				if !c.OK {
					fmt.Fprintf(stdout, "  FAIL %s (%s of rank %d): %s\n", c.Path, c.Role, c.Of, c.Error)
				}
			}
		}
	}
	if !ok {
		return 1
	}
	return 0
}

func runRebuild(args []string, stdout, stderr io.Writer) int {
	fs, jsonOut := runFlags("rebuild", `Rebuilds the newest recoverable checkpoint of a job that is not running:
lost or corrupted files are reconstructed from the surviving L2 partner
copies, L3 Reed-Solomon parity or the L4 container, exactly as a restart
would, then every committed checkpoint is verified. Exit 0 when the
rebuilt checkpoint verifies, 1 otherwise.

Example:
  ftigo rebuild /tmp/heat2d-123`, stderr)
	cfg, code, err := parseRunArgs(fs, args)
	if err != nil {
		if code != 0 {
			fmt.Fprintln(stderr, "ftigo rebuild:", err)
		}
		return code
	}
	m, err := ckpt.RebuildOffline(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ftigo rebuild:", err)
		return 1
	}
	if !*jsonOut {
		fmt.Fprintf(stdout, "rebuilt checkpoint %d (L%d, %s): a restart would use it\n", m.ID, int(m.Level), levels.ManifestName(m.Seq))
	}
	es, err := listRun(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "ftigo rebuild:", err)
		return 1
	}
	var keep []runEntry
	for _, e := range es {
		if e.Manifest != nil && e.Manifest.Seq == m.Seq {
			keep = append(keep, e)
		}
	}
	return verifyEntries(cfg, keep, *jsonOut, stdout, stderr)
}

func writeJSON(stdout, stderr io.Writer, v any) int {
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		fmt.Fprintln(stderr, "ftigo:", err)
		return 1
	}
	return 0
}
