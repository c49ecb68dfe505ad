package policy

// Planner is the online interval: it estimates the model's inputs from
// a run's history, chooses the plan and walks its pattern. ckpt's
// Snapshot (ckpt_interval = auto) and the simulator both use it, so
// what the simulator measures is what a run does.
type Planner struct {
	// Avail are the levels the run may use, ascending.
	Avail []int
	// Nodes is the run's node count (for Priors.Node).
	Nodes  int
	Priors Priors
	// Hist is the run's history; the planner reads it at Replan.
	Hist *History
	// Inputs are the estimates the current plan was made from.
	Inputs Inputs
	cur    Cursor
}

// Replan estimates the inputs again and chooses the plan, keeping the
// position in the pattern.
func (p *Planner) Replan() Plan {
	p.Inputs = Estimate(p.Hist, p.Avail, p.Nodes, p.Priors)
	plan := Optimum(p.Inputs.Levels)
	if p.cur.Next == 0 {
		p.cur.Next = 1
	}
	p.cur.Replan(plan)
	return plan
}

// Plan is the current plan.
func (p *Planner) Plan() Plan { return p.cur.Plan }

// Due returns the level to checkpoint at after since seconds of
// computation since the last checkpoint, or 0.
func (p *Planner) Due(since float64) int { return p.cur.Due(since) }

// Wait returns how much more computation the next checkpoint is due
// after (+Inf: none planned).
func (p *Planner) Wait(since float64) float64 {
	return max(p.cur.Plan.Segment()-since, 0)
}

// Next is the segment the next checkpoint ends (1-based).
func (p *Planner) Next() int { return p.cur.Next }

// Advance moves past the checkpoint just taken.
func (p *Planner) Advance() { p.cur.Advance() }

// Restart starts the pattern again (a new launch).
func (p *Planner) Restart() { p.cur.Next = 1 }

// Optimum is the plan ckpt_interval = auto takes for levels ls: the
// multi-level optimum (Optimize), with Daly's higher-order period when
// it uses one level.
func Optimum(ls []Level) Plan {
	plan := Optimize(ls)
	if len(plan.Levels) != 1 {
		return plan
	}
	for _, l := range ls {
		if l.ID == plan.Levels[0] {
			rate := 0.0
			for _, f := range ls {
				if f.ID <= l.ID {
					rate += f.Rate
				}
			}
			plan.Work = Daly(l.Cost, 1/rate)
			plan.Overhead = Evaluate(plan, ls)
		}
	}
	return plan
}
