package levels

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/ftigo/ftigo/vfd"
)

// Runs (docs/format/manifest.md#runs).
//
// A run is one job and its relaunches: FTI's execution, named by its
// exec_id. A run owns its directories: <glbl_dir>/<run> and
// <ckpt_dir>/node%04d/<run>. Its meta_dir names it in [RunFile]. Every
// manifest it commits records it ([Manifest.Run]).
//
// A meta_dir written before runs existed has no run file. Its run has
// the empty id, and its areas are glbl_dir and ckpt_dir/node%04d
// themselves. Its manifests record no run.

// Names and limits of runs.
//
// wire format: never change.
const (
	// RunFile is the file in meta_dir naming the run that owns it:
	// "ftigo-run <id>\n".
	RunFile = "ftigo.run"
	// MaxRunIDLen bounds a run id.
	MaxRunIDLen = 128
	runMagic    = "ftigo-run "
)

// ErrBadRun is returned for a run id that cannot name a directory, and
// wrapped by a *CorruptionError for a run file that does not parse.
var ErrBadRun = errors.New("levels: bad run id")

// ValidRunID checks that id can name a run: 1 to [MaxRunIDLen] letters,
// digits, '-', '_' and '.', starting with a letter or a digit. It must
// not be "manifests" or start with "ckpt": those names belong to a
// meta_dir's checkpoints beside which a run directory may sit.
func ValidRunID(id string) error {
	if id == "" || len(id) > MaxRunIDLen {
		return fmt.Errorf("%w: %q: want 1 to %d characters", ErrBadRun, truncate(id), MaxRunIDLen)
	}
	for i, c := range id {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || !strings.ContainsRune("-_.", c)) {
			return fmt.Errorf("%w: %q: letters, digits, '-', '_' and '.' only, starting with a letter or digit", ErrBadRun, truncate(id))
		}
	}
	if id == ReplicaDir || strings.HasPrefix(id, manifestPrefix) {
		return fmt.Errorf("%w: %q is the name of checkpoint metadata", ErrBadRun, id)
	}
	return nil
}

// NewRunID returns a new run id in FTI's exec_id form: the local time
// to the second, then 32 hex digits from rnd
// ("2026-12-03_14-05-07_<hex>").
func NewRunID(now time.Time, rnd io.Reader) (string, error) {
	var b [16]byte
	if _, err := io.ReadFull(rnd, b[:]); err != nil {
		return "", fmt.Errorf("levels: new run id: %w", err)
	}
	return now.Format("2006-01-02_15-04-05") + "_" + hex.EncodeToString(b[:]), nil
}

// RunDir returns the directory of run in the area directory base: base
// itself for the run of a meta_dir from before runs ("").
func RunDir(base, run string) string {
	if run == "" {
		return base
	}
	return path.Join(base, run)
}

// ReadRun returns the run that meta names in its [RunFile], and false
// when it has none. A run file that does not parse is an error wrapping
// [ErrBadRun].
func ReadRun(meta Store) (string, bool, error) {
	p := meta.Path(RunFile)
	raw, err := vfd.ReadFileLimit(meta.Driver, p, MaxRunIDLen+64)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, nil
	case errors.Is(err, vfd.ErrTooLarge):
		return "", false, &CorruptionError{Path: p, Rank: -1, Err: fmt.Errorf("%w: %w", ErrBadRun, err)}
	case err != nil:
		return "", false, err
	}
	line, ok := bytes.CutSuffix(raw, []byte("\n"))
	id, found := strings.CutPrefix(string(line), runMagic)
	if !ok || !found {
		return "", false, &CorruptionError{Path: p, Rank: -1, Err: fmt.Errorf("%w: want %q and the id on one line", ErrBadRun, runMagic)}
	}
	if err := ValidRunID(id); err != nil {
		return "", false, &CorruptionError{Path: p, Rank: -1, Offset: int64(len(runMagic)), Err: err}
	}
	return id, true, nil
}

// WriteRun makes meta name run in its [RunFile], durably.
func WriteRun(meta Store, run string) error {
	if err := ValidRunID(run); err != nil {
		return err
	}
	return vfd.WriteFileAtomic(meta.Driver, meta.Path(RunFile), []byte(runMagic+run+"\n"))
}

// RemoveRun removes meta's [RunFile]: the next start in meta begins a
// new run.
func RemoveRun(meta Store) error {
	return removeIfExists(meta.Driver, meta.Path(RunFile))
}

// HoldsCheckpoints reports whether meta holds checkpoint metadata of
// its own: manifests, markers or moved-aside copies (names starting
// with "ckpt"). A meta_dir without a [RunFile] that holds some was
// written before runs existed.
func HoldsCheckpoints(meta Store) (bool, error) {
	ents, err := meta.Driver.ReadDir(meta.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, fmt.Errorf("list %s: %w", meta.Dir, err)
	}
	return slices.ContainsFunc(ents, func(de fs.DirEntry) bool {
		_, ok := parseSeq(strings.SplitN(de.Name(), ".", 2)[0], "")
		return ok
	}), nil
}

// ListRuns returns the run directories of a global area directory, by
// name: the directories with a valid run id that hold a [ReplicaDir].
func ListRuns(global Store) ([]string, error) {
	ents, err := global.Driver.ReadDir(global.Dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list %s: %w", global.Dir, err)
	}
	var out []string
	for _, de := range ents {
		if !de.IsDir() || ValidRunID(de.Name()) != nil {
			continue
		}
		if st, err := global.Driver.Stat(path.Join(global.Path(de.Name()), ReplicaDir)); err == nil && st.IsDir() {
			out = append(out, de.Name())
		}
	}
	return out, nil
}

// ScanRun is [ScanCheckpoints] for the checkpoints of run: a manifest
// copy that records another run is foreign ([CopyForeign]). The meta
// and global stores are the run's own (see [RunDir]).
func ScanRun(run string, meta, global Store, locals ...Store) ([]SeqScan, error) {
	sc, err := scanMeta(meta, global, run)
	if err != nil {
		return nil, err
	}
	sc.loadParts(meta, global)
	for _, s := range append([]Store{global}, locals...) {
		as, err := ScanArea(s)
		if err != nil {
			return nil, err
		}
		sc.addArea(as)
	}
	return sc.list(), nil
}

// foreignRun returns the error of a valid manifest copy at p that
// records run got while the area belongs to run want, or nil.
func foreignRun(p string, got, want string) error {
	if got == want {
		return nil
	}
	name := func(r string) string {
		if r == "" {
			return "a run from before run ids"
		}
		return "run " + r
	}
	return &CorruptionError{Path: p, Rank: -1, Err: fmt.Errorf("%w: another run's manifest (%s; these directories are %s's)", ErrBadManifest, name(got), name(want))}
}
