package main

import "github.com/ftigo/ftigo/ckpt"

// availableLevels returns the levels the runtime offers (ckpt.Init
// registers L1-L4 by default); -levels auto takes them in turn.
func availableLevels() []ckpt.Level { return ckpt.Levels() }
