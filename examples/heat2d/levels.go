package main

import "github.com/ftigo/ftigo/levels"

// availableLevels returns the level implementations beyond L1 that the
// job registers with the runtime.
func availableLevels() []levels.Level {
	return nil
}
