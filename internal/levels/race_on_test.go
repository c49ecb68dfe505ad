//go:build race

package levels

// raceEnabled is true under the race detector, which slows the
// crash-at-every-op sweeps several times.
const raceEnabled = true
