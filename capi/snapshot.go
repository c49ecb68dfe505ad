package main

import (
	"fmt"

	"github.com/ftigo/ftigo/ckpt"
)

// snapSetting is ftigo_set_snapshot's: snapshot mode on or off and its
// budget (0: config.fti's snapshot_budget, or the default).
type snapSetting struct {
	on     bool
	budget int64
}

// apply sets cfg's snapshot keys from s (nothing when s is nil).
func (s *snapSetting) apply(cfg *ckpt.Config) {
	if s == nil {
		return
	}
	cfg.Snapshot = s.on
	if s.budget > 0 {
		cfg.SnapshotBudget = s.budget
	}
}

// setSnapshot is ftigo_set_snapshot: it turns snapshot mode (the
// ckpt_snapshot key: Checkpoint blocks only for a copy into memory) on
// or off for every later FTI_Init of the process, with budget bytes of
// staging memory per rank (snapshot_budget; 0 keeps config.fti's or the
// default). It must come before FTI_Init: the mode is the session's.
func (l *library) setSnapshot(on bool, budget int64) int {
	const fn = "ftigo_set_snapshot"
	switch {
	case l.state != stateNone:
		return l.fail(fn, "call it before FTI_Init: snapshot mode is set for the whole session")
	case budget < 0:
		return l.fail(fn, fmt.Sprintf("budget %d: must not be negative (0 keeps snapshot_budget)", budget))
	}
	l.snap = &snapSetting{on: on, budget: budget}
	return codeSuccess
}
