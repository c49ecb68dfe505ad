//go:build race

package comm

// raceEnabled: the race detector allows at most 8128 live goroutines,
// so the scale tests stop below that.
const raceEnabled = true
