//go:build race

package ckpt

// raceEnabled is true under the race detector, which slows the
// crash-at-every-op sweeps about tenfold.
const raceEnabled = true
