package main

import "github.com/ftigo/ftigo/internal/levels"

// availableLevels returns the levels the runtime offers (ckpt.Init
// registers L1-L4 by default); -levels auto takes them in turn.
func availableLevels() []levels.Level {
	return []levels.Level{levels.Local1{}, levels.Partner2{}, levels.RS3{}, levels.Global4{Inline: true}}
}
