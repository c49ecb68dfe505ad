package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
	"github.com/ftigo/ftigo/vfd"
)

// dcpReport is what inspect and verify say about a differential
// checkpoint: what it builds on and what it wrote.
type dcpReport struct {
	// Parent is the manifest of the checkpoint it builds on; Chain every
	// checkpoint it depends on, the full base first.
	Parent string   `json:"parent"`
	Chain  []string `json:"chain"`
	// Layers counts the chain's layers, this checkpoint included.
	Layers int `json:"layers"`
	// Share is Written/Protected, FTI's "dCP share".
	Share     float64 `json:"dcp_share"`
	Written   int64   `json:"bytes_written"`
	Protected int64   `json:"bytes_protected"`
	BlockSize int     `json:"block_size"`
}

// dcpOf describes m's chain, nil for a full checkpoint.
func dcpOf(m *levels.Manifest) *dcpReport {
	if m.DCP == nil {
		return nil
	}
	d := &dcpReport{Layers: m.Layers(), Share: m.DCP.Share(), Written: m.DCP.Written, Protected: m.DCP.Protected,
		BlockSize: m.DCP.BlockSize, Chain: []string{}}
	for _, s := range m.DCP.Chain {
		d.Chain = append(d.Chain, levels.ManifestName(s))
	}
	if p, ok := m.Parent(); ok {
		d.Parent = levels.ManifestName(p)
	}
	return d
}

// printDCP prints a differential checkpoint's line under its entry.
func printDCP(w io.Writer, d *dcpReport) {
	if d == nil {
		return
	}
	fmt.Fprintf(w, "    differential: layer %d on %s (chain %v), %.2f%% of %d bytes written (%d-byte dCP blocks)\n",
		d.Layers, d.Parent, d.Chain, 100*d.Share, d.Protected, d.BlockSize)
}

// missingLayers names the checkpoints of m's chain that are not
// committed ("" when none is missing): without them m cannot be restored.
func missingLayers(m *levels.Manifest, byseq map[uint64]*levels.Manifest) string {
	if m.DCP == nil {
		return ""
	}
	var gone []string
	for _, s := range m.DCP.Chain {
		if byseq[s] == nil {
			gone = append(gone, levels.ManifestName(s))
		}
	}
	if len(gone) == 0 {
		return ""
	}
	return fmt.Sprintf("differential on %v, which %s not committed", gone, map[bool]string{true: "is", false: "are"}[len(gone) == 1])
}

// manifests indexes the committed entries of a run by sequence number.
func manifests(es []runEntry) map[uint64]*levels.Manifest {
	out := map[uint64]*levels.Manifest{}
	for _, e := range es {
		if e.Committed && e.Manifest != nil {
			out[e.Manifest.Seq] = e.Manifest
		}
	}
	return out
}

// openData opens the data of entry f of m (held by holder): the file, or
// its task of the L4 container.
func openData(cfg ckpt.Config, m *levels.Manifest, holder int, f levels.File) (vfd.File, error) {
	s, p := filePath(cfg, m, holder, f)
	if f.Attrs[levels.AttrInContainer] != "" {
		s.Dir = cfg.GlobalDir(m.Run)
		return levels.OpenTask(s, f)
	}
	return vfd.OpenRead(s.Driver, p)
}

// openLayers opens rank of's data file in every layer of differential
// checkpoint m's chain, the full base first (through byseq).
func openLayers(cfg ckpt.Config, m *levels.Manifest, of int, byseq map[uint64]*levels.Manifest) ([]vfd.File, error) {
	var layers []vfd.File
	fail := func(err error) ([]vfd.File, error) {
		for _, f := range layers {
			f.Close()
		}
		return nil, err
	}
	for _, s := range append(append([]uint64(nil), m.DCP.Chain...), m.Seq) {
		x := byseq[s]
		if x == nil {
			return fail(fmt.Errorf("%w: it depends on %s, which is not committed", levels.ErrMissingLayer, levels.ManifestName(s)))
		}
		xf, ok := x.DataFile(of)
		if !ok {
			return fail(fmt.Errorf("%s lists no data file for rank %d", levels.ManifestName(s), of))
		}
		f, err := openData(cfg, x, of, xf)
		if err != nil {
			return fail(fmt.Errorf("layer %s: %w", levels.ManifestName(s), err))
		}
		layers = append(layers, f)
	}
	return layers, nil
}

// verifyData re-reads a data file chunk by chunk and checks every block:
// an FTI-FF file, or for a differential checkpoint its delta file and then
// the image of its whole chain (every layer's data file of that rank,
// found through byseq), checked against the image checksum the manifest
// records.
func verifyData(cfg ckpt.Config, m *levels.Manifest, holder int, df levels.File, byseq map[uint64]*levels.Manifest) error {
	if m.DCP == nil {
		f, err := openData(cfg, m, holder, df)
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
	layers, err := openLayers(cfg, m, df.Of, byseq)
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range layers {
			f.Close()
		}
	}()
	d, err := fileformat.OpenDelta(layers[len(layers)-1])
	if err == nil {
		err = d.Verify()
	}
	if err != nil {
		return err
	}
	img, err := fileformat.OpenImage(layers)
	if err != nil {
		return err
	}
	layers = nil // the image owns them
	defer img.Close()
	r, err := fileformat.Open(img)
	if err != nil {
		return err
	}
	if err := r.Verify(); err != nil {
		return err
	}
	if want := df.Attrs[levels.AttrImage]; levels.Digest(img.Checksum()).String() != want {
		return errors.New("the chain's image has checksum " + levels.Digest(img.Checksum()).String() + ", the manifest says " + want)
	}
	return nil
}
