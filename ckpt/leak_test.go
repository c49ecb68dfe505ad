package ckpt

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine started by them is
// still running once they have all finished. With stopChildVar set the
// binary is a stop test's child job instead.
func TestMain(m *testing.M) {
	if mode := os.Getenv(stopChildVar); mode != "" {
		stopChild(mode, os.Getenv(stopChildVar+"_DIR"))
	}
	goleak.VerifyTestMain(m)
}
