package vfdtest_test

import (
	"testing"

	"github.com/ftigo/ftigo/vfd"
	"github.com/ftigo/ftigo/vfd/vfdtest"
)

// The suite checks itself on the in-memory driver; vfd's own tests run it
// on every driver.
func TestSuiteOnCore(t *testing.T) {
	vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) { return vfd.NewCore(), "/" })
}

func ExampleTestDriver() {
	// In a driver's _test.go:
	//
	//	func TestConformance(t *testing.T) {
	//		vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) {
	//			return mydriver.New(), t.TempDir()
	//		})
	//	}
}
