package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
)

// compReport is what inspect says about a compressed checkpoint: the
// manifest's byte counts and ratio, and each variable some rank stored at
// reduced precision.
type compReport struct {
	Logical int64   `json:"logical_bytes"`
	Stored  int64   `json:"stored_bytes"`
	Ratio   float64 `json:"ratio"`
	// Lossy lists the lossy variables by id; LossyError says why their
	// files could not be read.
	Lossy      []lossyReport `json:"lossy,omitempty"`
	LossyError string        `json:"lossy_error,omitempty"`
}

// lossyReport is one lossy variable: its mode and the largest error any
// rank's copy holds (ranks counts them).
type lossyReport struct {
	ID     int32   `json:"id"`
	Name   string  `json:"name,omitempty"`
	Mode   string  `json:"mode"`
	MaxAbs float64 `json:"max_abs_error"`
	MaxRel float64 `json:"max_rel_error"`
	Ranks  int     `json:"ranks"`
}

// compOf describes m's compression (nil for an uncompressed checkpoint),
// reading each rank's data file metadata for the lossy variables.
func compOf(cfg ckpt.Config, m *levels.Manifest, byseq map[uint64]*levels.Manifest) *compReport {
	c := m.Compressed
	if c == nil {
		return nil
	}
	rep := &compReport{Logical: c.Logical, Stored: c.Stored, Ratio: c.Ratio()}
	lossy := map[int32]*lossyReport{}
	for r := 0; r < m.Ranks; r++ {
		vars, err := storedVars(cfg, m, r, byseq)
		if err != nil {
			rep.LossyError = fmt.Sprintf("rank %d: %v", r, err)
			break
		}
		for _, v := range vars {
			if v.Exact() {
				continue
			}
			l := lossy[v.ID]
			if l == nil {
				l = &lossyReport{ID: v.ID, Name: v.Name, Mode: v.Lossy.String()}
				lossy[v.ID] = l
			}
			if l.Mode != v.Lossy.String() {
				l.Mode = "mixed"
			}
			l.MaxAbs, l.MaxRel, l.Ranks = max(l.MaxAbs, v.Bound.Abs), max(l.MaxRel, v.Bound.Rel), l.Ranks+1
		}
	}
	for _, l := range lossy {
		rep.Lossy = append(rep.Lossy, *l)
	}
	slices.SortFunc(rep.Lossy, func(a, b lossyReport) int { return int(a.ID) - int(b.ID) })
	return rep
}

// storedVars returns the variables rank r's data of m holds, as their
// metadata records them (for a differential checkpoint, its chain's
// image).
func storedVars(cfg ckpt.Config, m *levels.Manifest, r int, byseq map[uint64]*levels.Manifest) ([]fileformat.VarInfo, error) {
	df, ok := m.DataFile(r)
	if !ok {
		return nil, fmt.Errorf("no data file")
	}
	if m.DCP == nil {
		f, err := openData(cfg, m, r, df)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		rd, err := fileformat.Open(f)
		if err != nil {
			return nil, err
		}
		return rd.Vars(), nil
	}
	layers, err := openLayers(cfg, m, r, byseq)
	if err != nil {
		return nil, err
	}
	img, err := fileformat.OpenImage(layers)
	if err != nil {
		for _, f := range layers {
			f.Close()
		}
		return nil, err
	}
	defer img.Close()
	rd, err := fileformat.Open(img)
	if err != nil {
		return nil, err
	}
	return rd.Vars(), nil
}

// printComp prints a compressed checkpoint's lines under its entry.
func printComp(w io.Writer, c *compReport) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "    compressed %.1fx: %d bytes of variable data stored in %d\n", c.Ratio, c.Logical, c.Stored)
	for _, l := range c.Lossy {
		fmt.Fprintf(w, "    lossy: variable %d %q %s on %d ranks, error up to %.3g (relative %.3g)\n", l.ID, l.Name, l.Mode, l.Ranks, l.MaxAbs, l.MaxRel)
	}
	if c.LossyError != "" {
		fmt.Fprintf(w, "    lossy variables unknown: %s\n", c.LossyError)
	}
}
