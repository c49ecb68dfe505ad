// Package policy decides when a run checkpoints and at which level. It
// is the model behind Snapshot's ckpt_interval = auto, the run history
// it learns from, and the simulator that measures it. It is internal to
// ftigo and does no I/O: ckpt reads and writes the history file.
//
// The parts:
//
//   - [Optimize]: the multi-level pattern of least expected waste
//     (Benoit, Cavelan, Le Fèvre, Robert and Sun, IEEE TC 66(7), 2017),
//     with [Young] and [Daly] for one level and [ExactOverhead] for the
//     exact single-level model. docs/protocol/interval.md has the model.
//   - [History]: what a run keeps of its checkpoints, launches and
//     failures, bounded, encoded by [History.Marshal].
//   - [Estimate]: the model's inputs from a history and the mtbf keys.
//   - [Planner] and [Cursor]: the online plan and its pattern.
//   - [Simulate]: a job with failures drawn at given rates, under a
//     [Scheduler]: the plan, FTI's fixed intervals or the online one.
//
// Times are seconds (float64) in the model and nanoseconds (int64) in
// the history. Nothing here is safe for concurrent use; there is no
// package-level mutable state.
//
// API stability: internal to ftigo; its names may change in any release.
package policy
