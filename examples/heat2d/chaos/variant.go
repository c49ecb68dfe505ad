package main

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/vfd"
)

// The variants of a run. plain is heat2d as the loop always ran it; the
// others exercise one feature each (see the package comment).
var variants = []string{"plain", "heads", "dcp", "reshape", "hdf5", "shared"}

// variantShift is where a seed keeps its variant index (with -variant
// all): bits 40-47, so that -seed replays the run's variant too.
const variantShift = 40

// variantOf returns the variant of a run of seed under the -variant flag v.
func variantOf(v string, seed uint64) string {
	if v != "all" {
		return v
	}
	return variants[int(seed>>variantShift&0xff)%len(variants)]
}

// withVariant returns seed with its variant bits set to run number i's
// variant in the rotation.
func withVariant(seed uint64, i int) uint64 {
	return seed&^(0xff<<variantShift) | uint64(i%len(variants))<<variantShift
}

// drawVariant adds variant v's settings to p, from rng.
func drawVariant(rng *rand.Rand, p *params, v string) {
	p.variant = v
	switch v {
	case "heads":
		// A head and one or more application ranks per node.
		sh := [][2]int{{4, 2}, {6, 3}, {8, 4}, {6, 2}}[rng.IntN(4)]
		p.ranks, p.nodes, p.heads = sh[0], sh[1], true
	case "dcp":
		p.config, p.dcp = true, true
		p.dcpMode = 1 + rng.IntN(2)
		p.dcpBlock = []int{512, 1024, 4096}[rng.IntN(3)]
		p.dcpStack = 2 + rng.IntN(4)
		// Differential checkpoints (5-8: dCP at L1-L4), with full ones between.
		p.levels = []string{"5,5,5,8", "5,6,7,8", "8,8,8,8", "1,5,5,5", "6,6,4,7", "7,8,5,6"}[rng.IntN(6)]
	case "reshape":
		p.reshape = true
	case "hdf5":
		p.config, p.ckptIO = true, 5
		p.levels = []string{"4", "1,4", "4,2,3,1", "2,4,4", "3,4"}[rng.IntN(5)]
	case "shared":
		p.config = true
	}
}

// shapes are the ranks and nodes a plain launch may have.
var shapes = [][2]int{{4, 4}, {8, 4}, {6, 3}, {4, 2}}

// layout is where one job's files are: its run directory (meta, the
// final field, its config.fti), and the node-local and global roots,
// inside it or shared with another job.
type layout struct {
	dir, local, global string
}

func ownLayout(dir string) layout {
	return layout{dir: dir, local: filepath.Join(dir, "local"), global: filepath.Join(dir, "global")}
}

// runDirs are the job's own directories: its meta directory, its run's
// directory in the global root and in each node's directory.
func (l layout) runDirs() []string {
	run := runOf(l.dir)
	out := []string{filepath.Join(l.dir, "meta")}
	if run == "" {
		return out
	}
	out = append(out, filepath.Join(l.global, run))
	nodes, _ := filepath.Glob(filepath.Join(l.local, "node*"))
	for _, n := range nodes {
		out = append(out, filepath.Join(n, run))
	}
	return out
}

// rel names path p as damage and the logs do: meta/..., global/...,
// local/... (relative to the roots), or "" when p is outside them.
func (l layout) rel(p string) string {
	for _, r := range []struct{ name, root string }{{"meta", filepath.Join(l.dir, "meta")}, {"global", l.global}, {"local", l.local}} {
		if x, err := filepath.Rel(r.root, p); err == nil && !strings.HasPrefix(x, "..") {
			return filepath.Join(r.name, x)
		}
	}
	return ""
}

// writeConfig writes the config.fti of a run with p's settings in lay.dir.
func writeConfig(p params, lay layout) error {
	c := ckpt.DefaultConfig()
	c.NodeSize, c.GroupSize, c.LocalTest = p.ranks/p.nodes, p.nodes, true
	c.CkptDir, c.GlblDir, c.MetaDir = lay.local, lay.global, filepath.Join(lay.dir, "meta")
	c.KeepLastCkpt = true
	if p.async {
		c.Async = [5]bool{2: true, 3: true, 4: true}
	}
	c.CkptIO = p.ckptIO
	if p.dcp {
		c.EnableDCP, c.DCPMode, c.DCPBlockSize, c.DCPStackSize = true, p.dcpMode, p.dcpBlock, p.dcpStack
	}
	b, err := ckpt.FormatConfig(c)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(lay.dir, 0o755); err != nil {
		return err
	}
	return vfd.WriteFileAtomic(vfd.Sec2{}, filepath.Join(lay.dir, "config.fti"), b)
}

// digestDirs returns a digest of every file under dirs (path, content).
func digestDirs(dirs []string) map[string][32]byte {
	out := map[string][32]byte{}
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil {
				out[p] = sha256.Sum256(b)
			}
			return nil
		})
	}
	return out
}

// changed lists the files that differ between two digests.
func changed(a, b map[string][32]byte) []string {
	var out []string
	for p, h := range a {
		if g, ok := b[p]; !ok || g != h {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// describe is a short text of the variant settings of p, for the log.
func (p params) describe() string {
	s := p.variant
	switch {
	case p.dcp:
		s += fmt.Sprintf(" dcp_mode=%d dcp_block_size=%d dcp_stack_size=%d", p.dcpMode, p.dcpBlock, p.dcpStack)
	case p.ckptIO != 0:
		s += fmt.Sprintf(" ckpt_io=%d", p.ckptIO)
	}
	return s
}
