package main

import (
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"
)

// writeScalePlot draws a scale sweep into name (.png or .svg).
func writeScalePlot(name string, r *scaleResult) error {
	return writePicture(name, func(format string) ([]byte, error) { return drawScaleResult(r, format) })
}

// scaleKinds are the columns of the scale chart.
var scaleKinds = []struct{ kind, title string }{{"init", "Init"}, {"checkpoint", "checkpoint"}, {"restart", "restart (Init + Recover)"}}

// scaleMetrics are the rows of the scale chart: a per-rank figure each.
var scaleMetrics = []struct {
	key, title string
	get        func(scaleRow) float64
	label      func(float64) string
}{
	{"cpu", "CPU per rank, s", func(r scaleRow) float64 { return r.CPURank }, fmtSeconds},
	{"bytes", "bytes received per rank", func(r scaleRow) float64 { return r.BytesRecv.Mean }, func(v float64) string { return fmtCompact(v) + "B" }},
	{"msgs", "messages received per rank", func(r scaleRow) float64 { return r.MsgsRecv.Mean }, fmtCompact},
}

// drawScaleResult draws r in format ("png" or "svg").
func drawScaleResult(r *scaleResult, format string) ([]byte, error) {
	if len(r.Rows) == 0 {
		return nil, errors.New("nothing to draw: no rows")
	}
	w, h := 1200, 110+250*len(scaleMetrics)
	return render(format, w, h, func(c canvas) { drawScale(c, r, float64(w), float64(h)) })
}

// levelColor is the color of a level's curves (Init: black).
func levelColor(level int) color.RGBA {
	if level == 0 {
		return colBlack
	}
	return rankColors[(level-1)%len(rankColors)]
}

// drawScale draws the cost per rank against the ranks, both axes
// logarithmic: a column per operation (Init, checkpoint, restart), a row
// per figure (CPU, bytes and messages received, per rank), a color per
// level, the smallest size per rank solid and the others dashed. A flat
// curve is a protocol whose cost per rank does not grow with the ranks.
func drawScale(c canvas, r *scaleResult, w, h float64) {
	c.rect(0, 0, w, h, colWhite, "")
	c.text(w/2, 24, "ftigo bench: cost per rank against the number of ranks", 11, colBlack, anchorMiddle, false)
	c.text(w/2, 44, fitText(r.Description, w), 7, colAxis, anchorMiddle, false)
	var ranks []float64
	var sizes []int64
	var levels []int
	for _, row := range r.Rows {
		if !slices.Contains(ranks, float64(row.Ranks)) {
			ranks = append(ranks, float64(row.Ranks))
		}
		if !slices.Contains(sizes, row.BytesRank) {
			sizes = append(sizes, row.BytesRank)
		}
		if row.Level > 0 && !slices.Contains(levels, row.Level) {
			levels = append(levels, row.Level)
		}
	}
	slices.Sort(ranks)
	slices.Sort(sizes)
	slices.Sort(levels)
	lx := 70.0
	for _, l := range append([]int{0}, levels...) {
		name := "Init"
		if l > 0 {
			name = fmt.Sprintf("L%d", l)
		}
		c.rect(lx, 58, 12, 12, levelColor(l), "legend")
		c.text(lx+18, 69, name, 7, colBlack, anchorStart, false)
		lx += 70
	}
	rest := sizes[1:]
	first := sizes[:1]
	style := fmt.Sprintf("solid: %s per rank", (*sizesFlag)(&first).String())
	if len(rest) > 0 {
		style += ", dashed: " + (*sizesFlag)(&rest).String()
	}
	c.text(lx+20, 69, style+"; x: ranks, both axes logarithmic", 7, colAxis, anchorStart, false)
	rankLabel := func(v float64) string { return fmt.Sprintf("%.0f", v) }
	panelW := (w - 40) / float64(len(scaleKinds))
	for mi, m := range scaleMetrics {
		for ki, k := range scaleKinds {
			var ss []series
			for _, size := range sizes {
				ls := levels
				if k.kind == "init" {
					ls = []int{0}
				}
				for _, level := range ls {
					var pts [][2]float64
					for _, row := range r.Rows {
						if row.Kind == k.kind && row.Level == level && row.BytesRank == size && m.get(row) > 0 {
							pts = append(pts, [2]float64{float64(row.Ranks), m.get(row)})
						}
					}
					slices.SortFunc(pts, func(a, b [2]float64) int { return int(math.Copysign(1, a[0]-b[0])) })
					name := fmt.Sprintf("%s-L%d-%s-%s", k.kind, level, strings.ReplaceAll(humanBytes(size), " ", ""), m.key)
					ss = append(ss, series{name: name, c: levelColor(level), dashed: size != sizes[0], pts: pts})
				}
			}
			spec := panelSpec{title: k.title + ": " + m.title, xs: ranks, xLabel: rankLabel, yLabel: m.label, logY: true}
			panel(c, 20+float64(ki)*panelW, 100+float64(mi)*250, panelW-20, 220, spec, ss)
		}
	}
}

// fmtCompact formats a tick count: 5, 20, 1k, 2.5M.
func fmtCompact(v float64) string {
	switch {
	case v >= 1e6:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e6), ".0") + "M"
	case v >= 1e3:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", v/1e3), ".0") + "k"
	}
	return fmtSeconds(v)
}
