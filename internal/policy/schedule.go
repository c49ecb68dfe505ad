package policy

import "math"

// Cursor walks a plan's pattern: which level ends the next segment.
type Cursor struct {
	Plan Plan
	// Next is the segment the next checkpoint ends, 1..Counts[0].
	Next int
}

// NewCursor starts p at its first segment.
func NewCursor(p Plan) *Cursor { return &Cursor{Plan: p, Next: 1} }

// Due returns the level to checkpoint at after since seconds of
// computation since the last checkpoint (0: not yet, or never).
func (c *Cursor) Due(since float64) int {
	if len(c.Plan.Counts) == 0 || since < c.Plan.Segment() {
		return 0
	}
	return c.Plan.LevelAt(c.Next)
}

// Advance moves to the next segment, after a checkpoint.
func (c *Cursor) Advance() {
	if len(c.Plan.Counts) > 0 {
		c.Next = c.Next%c.Plan.Counts[0] + 1
	}
}

// Replan keeps the position in the pattern with a new plan.
func (c *Cursor) Replan(p Plan) {
	c.Plan = p
	if len(p.Counts) > 0 {
		c.Next = (max(c.Next, 1)-1)%p.Counts[0] + 1
	} else {
		c.Next = 1
	}
}

// FixedOverhead approximates, to first order, the overhead of FTI's
// fixed schedule: level l every intervals[l-1] seconds of wall time (0:
// off), the highest due level taken when several fall together. The
// coincidences are neglected: checkpoints at level l or above come
// every 1/sum(1/I_j, j >= l) seconds, and each costs its level's cost.
// Failures above the highest scheduled level count as +Inf.
func FixedOverhead(intervals [MaxLevels]float64, ls []Level) float64 {
	byID := map[int]Level{}
	for _, l := range ls {
		byID[l.ID] = l
	}
	var h float64
	for l := 1; l <= MaxLevels; l++ {
		if iv := intervals[l-1]; iv > 0 {
			h += byID[l].Cost / iv
		}
	}
	for _, f := range ls {
		if f.Rate <= 0 {
			continue
		}
		freq, rec := 0.0, 0.0
		for l := f.ID; l <= MaxLevels; l++ {
			if iv := intervals[l-1]; iv > 0 {
				if freq == 0 {
					rec = byID[l].Recovery
				}
				freq += 1 / iv
			}
		}
		if freq == 0 {
			return math.Inf(1)
		}
		h += f.Rate * (1/(2*freq) + rec)
	}
	return h
}
