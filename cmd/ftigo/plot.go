package main

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ftigo/ftigo/vfd"
)

// The pictures of ftigo bench are drawn on a canvas with two back ends:
// SVG (text, elements named by their series) and PNG (rasterized here,
// text in a 5x7 bitmap font). Coordinates are pixels from the top left.

// anchor is where a text's reference point is: its start, middle or end.
type anchor int

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

// canvas is what a chart draws on.
type canvas interface {
	// rect fills a rectangle; series names what it shows ("" for frame).
	rect(x, y, w, h float64, c color.RGBA, series string)
	// polyline strokes a line through pts.
	polyline(pts [][2]float64, c color.RGBA, width float64, dashed bool, series string)
	// dot draws a filled square marker of half-size r at (x, y).
	dot(x, y, r float64, c color.RGBA, series string)
	// text writes s with its baseline at y; size is the height of a
	// capital letter in pixels; vertical texts run bottom to top.
	text(x, y float64, s string, size float64, c color.RGBA, a anchor, vertical bool)
}

var (
	colWhite = color.RGBA{255, 255, 255, 255}
	colBlack = color.RGBA{0, 0, 0, 255}
	colGrid  = color.RGBA{225, 225, 225, 255}
	colAxis  = color.RGBA{90, 90, 90, 255}
	// the series of the per-level chart
	colFtigo  = color.RGBA{31, 119, 180, 255}
	colRaw    = color.RGBA{170, 170, 170, 255}
	colStrong = color.RGBA{230, 120, 20, 255}
)

// rankColors tells the rank counts of a sweep apart.
var rankColors = []color.RGBA{{31, 119, 180, 255}, {230, 120, 20, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255}, {140, 86, 75, 255}}

// plotFormat returns "png" or "svg" from name's extension.
func plotFormat(name string) (string, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png":
		return "png", nil
	case ".svg":
		return "svg", nil
	}
	return "", errors.New("the file name must end in .png or .svg")
}

// writePlot draws r into name: the per-level chart when all rows are of
// one point (ranks, bytes per rank), else the scaling curves.
func writePlot(name string, r *benchResult) error {
	return writePicture(name, func(format string) ([]byte, error) { return drawResult(r, format) })
}

// writePicture writes what draw draws in the format of name's extension
// into name.
func writePicture(name string, draw func(format string) ([]byte, error)) error {
	format, err := plotFormat(name)
	if err != nil {
		return err
	}
	b, err := draw(format)
	if err != nil {
		return err
	}
	return vfd.WriteFileAtomic(vfd.Sec2{}, name, b)
}

// drawResult draws r in format ("png" or "svg").
func drawResult(r *benchResult, format string) ([]byte, error) {
	if len(r.Rows) == 0 {
		return nil, errors.New("nothing to draw: no rows")
	}
	draw := drawLevels
	w, h := levelsSize(r.Rows)
	if len(points(r.Rows)) > 1 {
		draw = drawScaling
		w, h = scalingSize(r.Rows)
	}
	return render(format, w, h, func(c canvas) { draw(c, r, float64(w), float64(h)) })
}

// render draws a w x h picture in format ("png" or "svg").
func render(format string, w, h int, draw func(c canvas)) ([]byte, error) {
	if format == "svg" {
		s := newSVG(w, h)
		draw(s)
		return s.bytes(), nil
	}
	p := newRaster(w, h)
	draw(p)
	var buf bytes.Buffer
	if err := png.Encode(&buf, p.img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// point is one configuration of a sweep.
type point struct {
	ranks int
	size  int64
}

// points lists the distinct (ranks, bytes per rank) of rows in order.
func points(rows []benchRow) []point {
	var out []point
	for _, r := range rows {
		p := point{r.Ranks, r.BytesRank}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// niceTicks returns about n round tick values covering [0, hi].
func niceTicks(hi float64, n int) []float64 {
	if hi <= 0 {
		hi = 1
	}
	raw := hi / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := 0.0; v <= hi*1.0001+step; v += step {
		out = append(out, v)
		if v >= hi {
			break
		}
	}
	return out
}

// fitText shortens s to what fits a line of w pixels in the small font
// (6 pixels a character), ending it with "..." when cut.
func fitText(s string, w float64) string {
	n := int(w-40) / 6
	if r := []rune(s); len(r) > n && n > 3 {
		return string(r[:n-3]) + "..."
	}
	return s
}

// fmtSeconds formats a tick or a value in seconds compactly.
func fmtSeconds(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
	case v >= 0.01:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
}

func levelsSize(rows []benchRow) (int, int) { return max(640, 120+len(rows)*120), 560 }

// drawLevels draws one group of three bars per row (checkpoint or
// restart of a level): ftigo, the raw reference and the strong one, with
// min-max whiskers and the two ratios above.
func drawLevels(c canvas, r *benchResult, w, h float64) {
	c.rect(0, 0, w, h, colWhite, "")
	left, right, top, bottom := 70.0, 20.0, 90.0, 70.0
	pw, ph := w-left-right, h-top-bottom
	c.text(w/2, 24, "ftigo bench: checkpoint and restart beside raw I/O of the same bytes", 11, colBlack, anchorMiddle, false)
	c.text(w/2, 44, fitText(r.Description, w), 7, colAxis, anchorMiddle, false)
	// legend
	lx := left
	for _, l := range []struct {
		name string
		c    color.RGBA
	}{{"ftigo", colFtigo}, {"raw (write+fsync; read)", colRaw}, {"strong (early writeback, overlapped fsyncs; read + rebuild write)", colStrong}} {
		c.rect(lx, 58, 12, 12, l.c, "legend")
		c.text(lx+18, 69, l.name, 7, colBlack, anchorStart, false)
		lx += 18 + float64(len(l.name))*6*7/7 + 24
	}
	hi := 0.0
	for _, row := range r.Rows {
		hi = max(hi, row.Time.Max, row.Raw.Max, row.Strong.Max)
	}
	ticks := niceTicks(hi, 6)
	top1 := ticks[len(ticks)-1]
	y := func(v float64) float64 { return top + ph - v/top1*ph }
	for _, t := range ticks {
		c.polyline([][2]float64{{left, y(t)}, {left + pw, y(t)}}, colGrid, 1, false, "grid")
		c.text(left-6, y(t)+4, fmtSeconds(t), 7, colAxis, anchorEnd, false)
	}
	c.text(18, top+ph/2, "seconds (median, min-max)", 7, colAxis, anchorMiddle, true)
	c.polyline([][2]float64{{left, top}, {left, top + ph}, {left + pw, top + ph}}, colAxis, 1, false, "axis")
	group := pw / float64(len(r.Rows))
	bar := group / 4
	for i, row := range r.Rows {
		x0 := left + float64(i)*group + bar/2
		for j, s := range []struct {
			st     stats
			c      color.RGBA
			series string
		}{{row.Time, colFtigo, "ftigo"}, {row.Raw, colRaw, "raw"}, {row.Strong, colStrong, "strong"}} {
			x := x0 + float64(j)*bar
			c.rect(x+1, y(s.st.Median), bar-2, y(0)-y(s.st.Median), s.c, s.series)
			c.polyline([][2]float64{{x + bar/2, y(s.st.Min)}, {x + bar/2, y(s.st.Max)}}, colBlack, 1, false, s.series+"-range")
		}
		c.text(x0+1.5*bar, y(max(row.Time.Max, row.Raw.Max, row.Strong.Max))-8,
			fmt.Sprintf("%.2fx / %.2fx", row.Ratio, row.RatioStrong), 7, colBlack, anchorMiddle, false)
		label := strings.Replace(row.Case, " checkpoint", " ckpt", 1)
		first, second, _ := strings.Cut(label, ", ")
		c.text(x0+1.5*bar, top+ph+18, first, 7, colBlack, anchorMiddle, false)
		if second != "" {
			c.text(x0+1.5*bar, top+ph+32, second, 7, colAxis, anchorMiddle, false)
		}
		if row.Kind == "restart" {
			cache := "cache kept"
			if row.CacheDropped {
				cache = "cache dropped"
			}
			c.text(x0+1.5*bar, top+ph+46, cache, 7, colAxis, anchorMiddle, false)
		}
	}
	c.text(w-right, h-8, "ratios: ftigo / raw, ftigo / strong (medians)", 7, colAxis, anchorEnd, false)
}

// scalingSize sizes the scaling chart: a row of panels per level.
func scalingSize(rows []benchRow) (int, int) {
	return 1200, 110 + 260*len(levelsOf(rows))
}

func levelsOf(rows []benchRow) []int {
	var out []int
	for _, r := range rows {
		if !slices.Contains(out, r.Level) {
			out = append(out, r.Level)
		}
	}
	slices.Sort(out)
	return out
}

// series is one curve of a scaling panel.
type series struct {
	name   string
	c      color.RGBA
	dashed bool
	pts    [][2]float64 // x = bytes per rank, y = value
}

// drawScaling draws, per level, how checkpoint and restart time and
// their ratios grow with the bytes per rank, one color per rank count:
// ftigo solid, the strong raw reference dashed; in the ratio panel the
// checkpoint against the strong reference solid and the restart against
// the raw read dashed.
func drawScaling(c canvas, r *benchResult, w, h float64) {
	c.rect(0, 0, w, h, colWhite, "")
	c.text(w/2, 24, "ftigo bench: scaling with bytes per rank and ranks", 11, colBlack, anchorMiddle, false)
	c.text(w/2, 44, fitText(r.Description, w), 7, colAxis, anchorMiddle, false)
	var ranks []int
	var sizes []int64
	for _, p := range points(r.Rows) {
		if !slices.Contains(ranks, p.ranks) {
			ranks = append(ranks, p.ranks)
		}
		if !slices.Contains(sizes, p.size) {
			sizes = append(sizes, p.size)
		}
	}
	slices.Sort(ranks)
	slices.Sort(sizes)
	colorOf := func(n int) color.RGBA { return rankColors[slices.Index(ranks, n)%len(rankColors)] }
	lx := 70.0
	for _, n := range ranks {
		c.rect(lx, 58, 12, 12, colorOf(n), "legend")
		c.text(lx+18, 69, fmt.Sprintf("%d ranks", n), 7, colBlack, anchorStart, false)
		lx += 100
	}
	c.text(lx+20, 69, "solid: ftigo (ratios: checkpoint / strong raw)   dashed: strong raw (ratios: restart / raw read)", 7, colAxis, anchorStart, false)
	panelW := (w - 40) / 3
	for li, level := range levelsOf(r.Rows) {
		top := 100 + float64(li)*260
		var ck, rs, ratios []series
		for _, n := range ranks {
			get := func(kind string, val func(benchRow) float64) [][2]float64 {
				var pts [][2]float64
				for _, row := range r.Rows {
					if row.Level == level && row.Ranks == n && row.Kind == kind {
						pts = append(pts, [2]float64{float64(row.BytesRank), val(row)})
					}
				}
				slices.SortFunc(pts, func(a, b [2]float64) int { return int(math.Copysign(1, a[0]-b[0])) })
				return pts
			}
			med := func(b benchRow) float64 { return b.Time.Median }
			strong := func(b benchRow) float64 { return b.Strong.Median }
			name := fmt.Sprintf("%d-ranks", n)
			ck = append(ck, series{name + "-ftigo", colorOf(n), false, get("checkpoint", med)}, series{name + "-strong", colorOf(n), true, get("checkpoint", strong)})
			rs = append(rs, series{name + "-ftigo", colorOf(n), false, get("restart", med)}, series{name + "-strong", colorOf(n), true, get("restart", strong)})
			ratios = append(ratios, series{name + "-checkpoint-ratio", colorOf(n), false, get("checkpoint", func(b benchRow) float64 { return b.RatioStrong })},
				series{name + "-restart-ratio", colorOf(n), true, get("restart", func(b benchRow) float64 { return b.Ratio })})
		}
		x := 20.0
		xs := make([]float64, len(sizes))
		for i, s := range sizes {
			xs[i] = float64(s)
		}
		sizeLabel := func(v float64) string { return strings.ReplaceAll(humanBytes(int64(v)), " ", "") }
		spec := func(title string, one bool) panelSpec {
			return panelSpec{title: title, xs: xs, xLabel: sizeLabel, logY: true, one: one}
		}
		panel(c, x, top, panelW-20, 220, spec(fmt.Sprintf("L%d checkpoint, seconds", level), false), ck)
		panel(c, x+panelW, top, panelW-20, 220, spec(fmt.Sprintf("L%d restart, seconds", level), false), rs)
		panel(c, x+2*panelW, top, panelW-20, 220, spec(fmt.Sprintf("L%d ratios to the references", level), true), ratios)
	}
}

// panelSpec is what a panel shows besides its curves.
type panelSpec struct {
	title string
	// xs are the x values with a tick each (a log2 axis), xLabel their
	// labels.
	xs     []float64
	xLabel func(float64) string
	// yLabel formats the y ticks (nil: seconds).
	yLabel func(float64) string
	// logY makes y logarithmic, else linear from 0; one draws a dashed
	// line at y = 1 (ratios).
	logY, one bool
}

// panel draws one scaling panel at (x, y) of size w x h: x logarithmic
// (base 2, a tick per value of spec.xs), y as spec says.
func panel(c canvas, x, y, w, h float64, spec panelSpec, ss []series) {
	left, bottom, top := 50.0, 30.0, 20.0
	px, py, pw, ph := x+left, y+top, w-left-10, h-top-bottom
	yLabel := spec.yLabel
	if yLabel == nil {
		yLabel = fmtSeconds
	}
	logY, one := spec.logY, spec.one
	c.text(x+w/2, y+10, spec.title, 8, colBlack, anchorMiddle, false)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.pts {
			if p[1] > 0 {
				lo, hi = min(lo, p[1]), max(hi, p[1])
			}
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 0.1, 1
	}
	if one {
		lo, hi = min(lo, 1), max(hi, 1)
	}
	var ticks []float64
	var yOf func(v float64) float64
	if logY {
		l0, l1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if l1 == l0 {
			l1++
		}
		yOf = func(v float64) float64 { return py + ph - (math.Log10(max(v, 1e-12))-l0)/(l1-l0)*ph }
		for e := l0; e <= l1; e++ {
			for _, m := range []float64{1, 2, 5} {
				if v := m * math.Pow(10, e); math.Log10(v) <= l1+1e-9 && (m == 1 || l1-l0 <= 2) {
					ticks = append(ticks, v)
				}
			}
		}
	} else {
		ticks = niceTicks(max(hi, 1), 5)
		top := ticks[len(ticks)-1]
		yOf = func(v float64) float64 { return py + ph - v/top*ph }
	}
	for _, t := range ticks {
		c.polyline([][2]float64{{px, yOf(t)}, {px + pw, yOf(t)}}, colGrid, 1, false, "grid")
		c.text(px-5, yOf(t)+4, yLabel(t), 7, colAxis, anchorEnd, false)
	}
	if one {
		c.polyline([][2]float64{{px, yOf(1)}, {px + pw, yOf(1)}}, colAxis, 1, true, "one")
	}
	// x: log2 of the value, one tick per value
	l0, l1 := math.Log2(spec.xs[0]), math.Log2(spec.xs[len(spec.xs)-1])
	if l1 == l0 {
		l0, l1 = l0-1, l1+1
	}
	xOf := func(v float64) float64 { return px + 10 + (math.Log2(v)-l0)/(l1-l0)*(pw-20) }
	for _, v := range spec.xs {
		c.polyline([][2]float64{{xOf(v), py + ph}, {xOf(v), py + ph + 4}}, colAxis, 1, false, "tick")
		c.text(xOf(v), py+ph+16, spec.xLabel(v), 7, colAxis, anchorMiddle, false)
	}
	c.polyline([][2]float64{{px, py}, {px, py + ph}, {px + pw, py + ph}}, colAxis, 1, false, "axis")
	for _, s := range ss {
		var pts [][2]float64
		for _, p := range s.pts {
			pts = append(pts, [2]float64{xOf(p[0]), yOf(p[1])})
		}
		if len(pts) > 1 {
			c.polyline(pts, s.c, 2, s.dashed, s.name)
		}
		for _, p := range pts {
			c.dot(p[0], p[1], 3, s.c, s.name)
		}
	}
}

// svgCanvas writes SVG elements as text.
type svgCanvas struct {
	b    strings.Builder
	w, h int
}

func newSVG(w, h int) *svgCanvas {
	s := &svgCanvas{w: w, h: h}
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">`+"\n", w, h, w, h)
	return s
}

func svgColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

func svgSeries(series string) string {
	if series == "" {
		return ""
	}
	return fmt.Sprintf(` class="%s"`, html.EscapeString(series))
}

func (s *svgCanvas) rect(x, y, w, h float64, c color.RGBA, series string) {
	fmt.Fprintf(&s.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"%s/>`+"\n", x, y, max(w, 0), max(h, 0), svgColor(c), svgSeries(series))
}

func (s *svgCanvas) polyline(pts [][2]float64, c color.RGBA, width float64, dashed bool, series string) {
	var p []string
	for _, q := range pts {
		p = append(p, fmt.Sprintf("%.1f,%.1f", q[0], q[1]))
	}
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="6,4"`
	}
	fmt.Fprintf(&s.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="%.1f"%s%s/>`+"\n", strings.Join(p, " "), svgColor(c), width, dash, svgSeries(series))
}

func (s *svgCanvas) dot(x, y, r float64, c color.RGBA, series string) {
	s.rect(x-r, y-r, 2*r, 2*r, c, series)
}

func (s *svgCanvas) text(x, y float64, t string, size float64, c color.RGBA, a anchor, vertical bool) {
	anchors := [...]string{"start", "middle", "end"}
	rot := ""
	if vertical {
		rot = fmt.Sprintf(` transform="rotate(-90 %.1f %.1f)"`, x, y)
	}
	fmt.Fprintf(&s.b, `<text x="%.1f" y="%.1f" font-size="%.1f" fill="%s" text-anchor="%s"%s>%s</text>`+"\n",
		x, y, size*1.45, svgColor(c), anchors[a], rot, html.EscapeString(t))
}

func (s *svgCanvas) bytes() []byte { return []byte(s.b.String() + "</svg>\n") }

// rasterCanvas draws into an RGBA image.
type rasterCanvas struct{ img *image.RGBA }

func newRaster(w, h int) *rasterCanvas {
	return &rasterCanvas{img: image.NewRGBA(image.Rect(0, 0, w, h))}
}

func (p *rasterCanvas) set(x, y int, c color.RGBA) {
	if image.Pt(x, y).In(p.img.Rect) {
		p.img.SetRGBA(x, y, c)
	}
}

func (p *rasterCanvas) rect(x, y, w, h float64, c color.RGBA, _ string) {
	x0, y0 := int(math.Round(x)), int(math.Round(y))
	x1, y1 := int(math.Round(x+w)), int(math.Round(y+h))
	for j := y0; j < y1; j++ {
		for i := x0; i < x1; i++ {
			p.set(i, j, c)
		}
	}
}

func (p *rasterCanvas) polyline(pts [][2]float64, c color.RGBA, width float64, dashed bool, _ string) {
	r := max(0, int(math.Round(width/2-0.5)))
	walked := 0.0
	for i := 1; i < len(pts); i++ {
		x0, y0, x1, y1 := pts[i-1][0], pts[i-1][1], pts[i][0], pts[i][1]
		n := max(1, int(math.Ceil(math.Max(math.Abs(x1-x0), math.Abs(y1-y0)))))
		step := math.Hypot(x1-x0, y1-y0) / float64(n)
		for k := 0; k <= n; k++ {
			walked += step
			if dashed && math.Mod(walked, 10) >= 6 {
				continue
			}
			x := int(math.Round(x0 + (x1-x0)*float64(k)/float64(n)))
			y := int(math.Round(y0 + (y1-y0)*float64(k)/float64(n)))
			for dy := -r; dy <= r; dy++ {
				for dx := -r; dx <= r; dx++ {
					p.set(x+dx, y+dy, c)
				}
			}
		}
	}
}

func (p *rasterCanvas) dot(x, y, r float64, c color.RGBA, series string) {
	p.rect(x-r, y-r, 2*r+1, 2*r+1, c, series)
}

// text draws t in the bitmap font, scaled so that a capital letter is
// about size pixels high (whole multiples of 7 pixels, at least one).
func (p *rasterCanvas) text(x, y float64, t string, size float64, c color.RGBA, a anchor, vertical bool) {
	scale := max(1, int(math.Round(size/7)))
	adv := 6 * scale
	n := len([]rune(t))
	width := n * adv
	off := [...]int{0, width / 2, width}[a]
	for i, ch := range []rune(t) {
		g, ok := glyphs[ch]
		if ch == '×' {
			g, ok = glyphs['x'], true
		}
		if !ok && ch != ' ' {
			g = [7]byte{0x1f, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1f}
		}
		for row := range 7 {
			for col := range 5 {
				if g[row]&(0x10>>col) == 0 {
					continue
				}
				// glyph pixel (u, v) from the text's start, baseline at v = 0
				u := i*adv + col*scale - off
				v := (row - 7) * scale
				if descends[ch] {
					v += 2 * scale
				}
				for sy := range scale {
					for sx := range scale {
						if vertical {
							p.set(int(x)+v+sy, int(y)-u-sx, c)
						} else {
							p.set(int(x)+u+sx, int(y)+v+sy, c)
						}
					}
				}
			}
		}
	}
}
