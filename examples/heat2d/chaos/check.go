package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// verifyOutcome is what ftigo verify said of a run directory.
type verifyOutcome struct {
	ok   bool
	lost []string // metadata files it reported as lost metadata
}

// verify runs ftigo verify --json on dir: exit 0 (ok) or 1 with a JSON
// report; anything else (a crash, a usage error, no report) is an error.
func (ch *chaos) verify(dir string) (*verifyOutcome, error) {
	ch.st.Verifies++
	cmd := exec.Command(ch.ftigo, "verify", "--json", dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(ch.cfg.Timeout):
		_ = cmd.Process.Kill()
		<-done
		return nil, fmt.Errorf("ftigo verify did not exit within %v", ch.cfg.Timeout)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		return nil, err
	}
	var res struct {
		OK       bool `json:"ok"`
		Metadata []struct {
			Path    string `json:"path"`
			Problem string `json:"problem"`
		} `json:"metadata"`
	}
	if code > 1 || panicked(stderr.String()) || json.Unmarshal(stdout.Bytes(), &res) != nil || res.OK != (code == 0) {
		return nil, fmt.Errorf("ftigo verify exited %d with no consistent report:\n%s%s", code, tail(stdout.String()), tail(stderr.String()))
	}
	out := &verifyOutcome{ok: res.OK}
	if !res.OK {
		ch.st.VerifyFails++
	}
	for _, m := range res.Metadata {
		if strings.Contains(m.Problem, "checkpoint metadata lost") {
			out.lost = append(out.lost, m.Path)
		}
	}
	return out, nil
}

// runOf returns the run the meta directory of run directory dir names
// ("" for none): its checkpoints are in global/<run> and
// local/node%04d/<run>.
func runOf(dir string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "meta", "ftigo.run"))
	id, _ := strings.CutPrefix(strings.TrimSpace(string(b)), "ftigo-run ")
	return id
}

// globalOf is the directory of the run of lay.dir in the global root.
func globalOf(lay layout) string { return filepath.Join(lay.global, runOf(lay.dir)) }

// artefacts lists the checkpoint artefacts of the job of lay, as the
// silent-fresh-start rule defines them (package comment).
func artefacts(lay layout) []string {
	dir := lay.dir
	meta := filepath.Join(dir, "meta")
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	var marked func(seqDir string, depth int) bool
	marked = func(seqDir string, depth int) bool {
		for _, suf := range []string{".pending", ".deleting"} {
			if exists(filepath.Join(meta, seqDir+suf)) {
				return true
			}
		}
		// A superseded marker counts when the newer checkpoint it names
		// has a manifest copy (an artefact of its own) or is marked.
		sup, _ := filepath.Glob(filepath.Join(meta, seqDir+".superseded-*"))
		for _, p := range sup {
			by := "ckpt" + strings.TrimPrefix(filepath.Base(p), seqDir+".superseded-")
			if depth < 64 && (exists(filepath.Join(meta, by+".manifest")) ||
				exists(filepath.Join(globalOf(lay), "manifests", by+".manifest")) || marked(by, depth+1)) {
				return true
			}
		}
		return false
	}
	var out []string
	add := func(p, seqDir string) {
		if !marked(seqDir, 0) {
			out = append(out, p)
		}
	}
	for _, d := range []string{meta, filepath.Join(globalOf(lay), "manifests")} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if seqDir, ok := strings.CutSuffix(e.Name(), ".manifest"); ok && strings.HasPrefix(seqDir, "ckpt") {
				add(filepath.Join(d, e.Name()), seqDir)
			}
		}
	}
	areas := []string{globalOf(lay)}
	nodes, _ := filepath.Glob(filepath.Join(lay.local, "node*"))
	for _, n := range nodes {
		areas = append(areas, filepath.Join(n, runOf(dir)))
	}
	for _, a := range areas {
		ents, _ := os.ReadDir(a)
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), "ckpt") {
				continue
			}
			_ = filepath.WalkDir(filepath.Join(a, e.Name()), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".tmp") {
					add(p, e.Name())
				}
				return nil
			})
		}
	}
	return out
}
