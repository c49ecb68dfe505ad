package main

import (
	"errors"
	"fmt"
	"image/color"

	"github.com/ftigo/ftigo/internal/policy"
)

// The colors of the stats timeline (levels: levelColor).
var (
	colRun     = color.RGBA{200, 220, 240, 255}
	colRecover = color.RGBA{230, 120, 20, 255}
	colLost    = color.RGBA{150, 20, 110, 255}
	colTotal   = color.RGBA{190, 190, 190, 255}
)

// writeStatsPlot draws history h's timeline into name (.png or .svg).
func writeStatsPlot(name string, h *policy.History) error {
	return writePicture(name, func(format string) ([]byte, error) { return drawStatsResult(h, format) })
}

// drawStatsResult draws h's timeline in format ("png" or "svg").
func drawStatsResult(h *policy.History, format string) ([]byte, error) {
	if len(h.Launches) == 0 {
		return nil, errors.New("nothing to draw: the history has no launch")
	}
	w, h1 := 1200, 140+60*(policy.MaxLevels+1)
	return render(format, w, h1, func(c canvas) { drawStats(c, h, float64(w), float64(h1)) })
}

// drawStats draws the run's timeline against the wall time since the
// oldest launch kept. The top row is the launches: their running time,
// the recovery that began each restarted one, and the work a failure
// lost (the end of the failed launch, from the checkpoint the next one
// restarted from). A row per level below shows its checkpoints: the
// time they blocked the solver in the level's color, their background
// time after it in grey, a dot over the final checkpoint of a stop.
func drawStats(c canvas, h *policy.History, w, ht float64) {
	c.rect(0, 0, w, ht, colWhite, "")
	title := "ftigo stats: the run's timeline"
	if h.Run != "" {
		title += " (run " + h.Run + ")"
	}
	c.text(w/2, 24, title, 11, colBlack, anchorMiddle, false)
	t0, t1 := h.Launches[0].Start, h.Launches[0].Start
	for _, l := range h.Launches {
		t1 = max(t1, l.End, l.Seen, l.Start)
	}
	for _, ck := range h.Checkpoints {
		if ck.Time >= t0 {
			t1 = max(t1, ck.Time+ck.Total)
		}
	}
	span := float64(t1-t0) / 1e9
	ticks := niceTicks(span, 10)
	hi := ticks[len(ticks)-1]
	left, right := 90.0, 20.0
	pw := w - left - right
	x := func(ns int64) float64 { return left + float64(ns-t0)/1e9/hi*pw }
	dx := func(ns int64) float64 { return float64(ns) / 1e9 / hi * pw }
	// legend
	lx := left
	for _, l := range []struct {
		name string
		c    color.RGBA
	}{{"running", colRun}, {"recovery", colRecover}, {"lost work", colLost}, {"blocked (the level's color)", levelColor(1)}, {"background (async)", colTotal}} {
		c.rect(lx, 48, 12, 12, l.c, "legend")
		c.text(lx+18, 59, l.name, 7, colBlack, anchorStart, false)
		lx += 18 + float64(len(l.name))*6 + 24
	}
	c.text(lx, 59, "dot: final checkpoint of a stop; X: a failure and its level", 7, colAxis, anchorStart, false)
	const top, rowH = 90.0, 60.0
	bottom := top + rowH*float64(policy.MaxLevels+1)
	for _, t := range ticks {
		xt := left + t/hi*pw
		c.polyline([][2]float64{{xt, top}, {xt, bottom}}, colGrid, 1, false, "grid")
		c.text(xt, bottom+16, fmtSeconds(t), 7, colAxis, anchorMiddle, false)
	}
	c.text(left+pw/2, bottom+36, "wall time since the first launch kept, seconds", 7, colAxis, anchorMiddle, false)
	// The launches row.
	y0 := top + 10
	c.text(left-8, y0+24, "launches", 7, colBlack, anchorEnd, false)
	for i, l := range h.Launches {
		end := max(l.End, l.Seen, l.Start)
		c.rect(x(l.Start), y0, max(dx(end-l.Start), 1), 40, colRun, "launch")
		if r := l.Restart; r != nil {
			c.rect(x(l.Start), y0, max(dx(r.Recover), 2), 40, colRecover, "recovery")
		}
		if l.Failure > 0 && i > 0 {
			prev := h.Launches[i-1]
			died := max(prev.Seen, prev.Start)
			if l.LostWork > 0 {
				c.rect(x(max(died-l.LostWork, t0)), y0+10, max(dx(min(l.LostWork, died-t0)), 1), 20, colLost, "lost")
			}
			xf := x(died)
			c.polyline([][2]float64{{xf - 5, y0 - 5}, {xf + 5, y0 + 5}}, colLost, 2, false, "failure")
			c.polyline([][2]float64{{xf - 5, y0 + 5}, {xf + 5, y0 - 5}}, colLost, 2, false, "failure")
			c.text(xf, y0-8, fmt.Sprintf("L%d", l.Failure), 7, colLost, anchorMiddle, false)
		}
	}
	// A row per level.
	for lvl := 1; lvl <= policy.MaxLevels; lvl++ {
		y := top + rowH*float64(lvl) + 10
		c.polyline([][2]float64{{left, y + 40}, {left + pw, y + 40}}, colGrid, 1, false, "grid")
		c.text(left-8, y+24, fmt.Sprintf("L%d", lvl), 7, colBlack, anchorEnd, false)
		for _, ck := range h.Checkpoints {
			if ck.Level != lvl || ck.Time < t0 {
				continue
			}
			series := fmt.Sprintf("L%d", lvl)
			if ck.Total > ck.Blocked {
				c.rect(x(ck.Time+ck.Blocked), y+10, dx(ck.Total-ck.Blocked), 20, colTotal, series+"-background")
			}
			c.rect(x(ck.Time), y, max(dx(ck.Blocked), 1.5), 40, levelColor(lvl), series)
			if ck.Final {
				c.dot(x(ck.Time), y-4, 3, colBlack, "final")
			}
		}
	}
	c.polyline([][2]float64{{left, top}, {left, bottom}, {left + pw, bottom}}, colAxis, 1, false, "axis")
}
