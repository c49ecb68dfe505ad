package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// damage damages one random checkpoint artefact of dir and says what it
// did ("kind path"): flip (one byte xor'ed), truncate (to a random
// length), empty, delete, swap (a manifest copy replaced by another
// checkpoint's, or the two primaries exchanged), foreign (a manifest copy
// or the node table replaced by another run's file of the same name, kept
// from an earlier run in work/foreign). Candidates: every file of the
// checkpoint directories of every area (data files, partner copies,
// parity, L4 containers), the manifest copies, the node table
// (meta/topology); the metadata is picked four times in ten.
func damage(rng *rand.Rand, lay layout, work string) (string, bool) {
	var files []string
	walk := func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		rel := lay.rel(p)
		switch {
		case strings.HasPrefix(rel, "meta"+string(filepath.Separator)) && (strings.HasSuffix(rel, ".manifest") || filepath.Base(rel) == "topology"):
		case strings.HasPrefix(rel, "global"+string(filepath.Separator)) || strings.HasPrefix(rel, "local"+string(filepath.Separator)):
			if strings.HasSuffix(rel, ".tmp") || filepath.Base(rel) == "ftigo.lock" {
				return nil // the lock's content only names its holder
			}
		default:
			return nil
		}
		files = append(files, p)
		return nil
	}
	for _, d := range lay.runDirs() {
		_ = filepath.WalkDir(d, walk)
	}
	if len(files) == 0 {
		return "", false
	}
	slices.Sort(files)
	pick := files
	var meta []string
	for _, f := range files {
		if strings.HasSuffix(f, ".manifest") || filepath.Base(f) == "topology" {
			meta = append(meta, f)
		}
	}
	if len(meta) > 0 && rng.Float64() < 0.4 {
		pick = meta // the metadata, four in ten times
	}
	f := pick[rng.IntN(len(pick))]
	rel := lay.rel(f)
	isMeta := strings.HasSuffix(f, ".manifest") || filepath.Base(f) == "topology"
	b, err := os.ReadFile(f)
	if err != nil {
		return "", false
	}
	// An earlier run's file of the same name, for "foreign" damage.
	var fb []byte
	if isMeta {
		fb, _ = os.ReadFile(filepath.Join(work, "foreign", foreignName(rel)))
	}
	kinds := []string{"flip", "truncate", "empty", "delete"}
	if isMeta {
		kinds = append(kinds, "swap", "foreign", "swap", "foreign")
	}
	kind := kinds[rng.IntN(len(kinds))]
	switch kind {
	case "flip":
		if len(b) == 0 {
			return "", false
		}
		i := rng.IntN(len(b))
		b[i] ^= byte(1 + rng.IntN(255))
		return fmt.Sprintf("flip %s@%d", rel, i), os.WriteFile(f, b, 0o644) == nil
	case "truncate":
		if len(b) == 0 {
			return "", false
		}
		n := rng.IntN(len(b))
		return fmt.Sprintf("truncate %s to %d", rel, n), os.Truncate(f, int64(n)) == nil
	case "empty":
		return "empty " + rel, os.Truncate(f, 0) == nil
	case "delete":
		return "delete " + rel, os.Remove(f) == nil
	case "swap":
		var others []string
		for _, o := range files {
			if o != f && strings.HasSuffix(o, ".manifest") {
				others = append(others, o)
			}
		}
		if len(others) == 0 || !strings.HasSuffix(f, ".manifest") {
			return "", false
		}
		o := others[rng.IntN(len(others))]
		ob, err := os.ReadFile(o)
		if err != nil {
			return "", false
		}
		orel := lay.rel(o)
		if rng.IntN(2) == 0 {
			// Exchange the two files.
			if os.WriteFile(f, ob, 0o644) != nil || os.WriteFile(o, b, 0o644) != nil {
				return "", false
			}
			return fmt.Sprintf("swap %s and %s", rel, orel), true
		}
		return fmt.Sprintf("swap %s replaced by %s", rel, orel), os.WriteFile(f, ob, 0o644) == nil
	case "foreign":
		if fb == nil || bytes.Equal(fb, b) {
			return "", false
		}
		return "foreign " + rel, os.WriteFile(f, fb, 0o644) == nil
	}
	return "", false
}

// foreignName is the name of rel's copy in the pool of metadata from
// earlier runs: the run's id left out, so that the copies of another
// run stand in for this one's.
func foreignName(rel string) string {
	parts := strings.Split(rel, string(filepath.Separator))
	if len(parts) == 4 && parts[0] == "global" && parts[2] == "manifests" {
		parts = append(parts[:1], parts[2:]...)
	}
	return strings.Join(parts, "_")
}

// snapshotMeta copies the metadata of the job of lay (manifest copies,
// node table) into work/foreign-next; at the end of the run that becomes
// the pool "foreign" damage draws from (another run's files).
func snapshotMeta(lay layout, work string) {
	next := filepath.Join(work, "foreign-next")
	_ = os.MkdirAll(next, 0o755)
	meta := filepath.Join(lay.dir, "meta")
	for _, pat := range []string{filepath.Join(meta, "ckpt*.manifest"), filepath.Join(globalOf(lay), "manifests", "ckpt*.manifest"), filepath.Join(meta, "topology")} {
		ms, _ := filepath.Glob(pat)
		for _, m := range ms {
			rel := lay.rel(m)
			if b, err := os.ReadFile(m); err == nil {
				_ = os.WriteFile(filepath.Join(next, foreignName(rel)), b, 0o644)
			}
		}
	}
}

// rotateForeign makes this run's snapshots the pool of the next runs.
func rotateForeign(work string) {
	next := filepath.Join(work, "foreign-next")
	if _, err := os.Stat(next); err != nil {
		return
	}
	_ = os.RemoveAll(filepath.Join(work, "foreign"))
	_ = os.Rename(next, filepath.Join(work, "foreign"))
}

// touched returns the files a damage description names.
func touched(what string) []string {
	f := strings.Fields(what)
	if len(f) < 2 {
		return nil
	}
	out := []string{strings.Split(f[1], "@")[0]}
	if f[0] == "swap" && len(f) >= 4 && f[2] == "and" {
		out = append(out, f[3])
	}
	return out
}

// manifestCopy reports whether rel (relative to the run directory) is a
// manifest copy, and of which checkpoint.
func manifestCopy(rel string) (string, bool) {
	base := filepath.Base(rel)
	seq, ok := strings.CutSuffix(base, ".manifest")
	if !ok || !strings.HasPrefix(seq, "ckpt") {
		return "", false
	}
	d := filepath.Dir(rel)
	if d == "meta" || filepath.Base(d) == "manifests" && filepath.Dir(filepath.Dir(d)) == "global" {
		return seq, true // meta/ or global/<run>/manifests/
	}
	return "", false
}
