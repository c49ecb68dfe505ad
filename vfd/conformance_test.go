package vfd_test

import (
	"testing"

	"github.com/ftigo/ftigo/vfd"
	"github.com/ftigo/ftigo/vfd/vfdtest"
)

func TestConformanceSec2(t *testing.T) {
	vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) { return vfd.Sec2{}, t.TempDir() })
}

func TestConformanceCore(t *testing.T) {
	vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) {
		c := vfd.NewCore()
		if err := c.MkdirAll("work/dir", 0o755); err != nil {
			t.Fatal(err)
		}
		return c, "/work/dir"
	})
}

func TestConformanceFault(t *testing.T) {
	vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) {
		return vfd.NewFault(vfd.Sec2{}, vfd.Latency(0)), t.TempDir()
	})
}
