package vfd_test

import (
	"testing"

	"go.uber.org/zap/zaptest"

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

func familyConfig() vfdtest.Config {
	return vfdtest.Config{
		Name:   func(b string) string { return b + "-%03d.bin" },
		Listed: func(b string) []string { return []string{b + "-000.bin"} },
	}
}

func TestConformanceFamily(t *testing.T) {
	t.Run("sec2", func(t *testing.T) {
		vfdtest.TestDriverConfig(t, func(t *testing.T) (vfd.Driver, string) {
			return vfd.NewFamily(vfd.Sec2{}, 4096), t.TempDir()
		}, familyConfig())
	})
	t.Run("core", func(t *testing.T) {
		vfdtest.TestDriverConfig(t, func(t *testing.T) (vfd.Driver, string) {
			return vfd.NewFamily(vfd.NewCore(), 4096), "/"
		}, familyConfig())
	})
}

func TestConformanceStdio(t *testing.T) {
	t.Run("sec2", func(t *testing.T) {
		vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) { return vfd.NewStdio(vfd.Sec2{}, 4096), t.TempDir() })
	})
	t.Run("core", func(t *testing.T) {
		vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) { return vfd.NewStdio(vfd.NewCore(), 0), "/" })
	})
}

func TestConformanceLog(t *testing.T) {
	vfdtest.TestDriver(t, func(t *testing.T) (vfd.Driver, string) {
		return vfd.NewLog(vfd.Sec2{}, zaptest.NewLogger(t)), t.TempDir()
	})
}

func TestConformanceSplit(t *testing.T) {
	cfg := vfdtest.Config{Listed: func(b string) []string { return []string{b + "-m.h5", b + "-r.h5"} }}
	t.Run("sec2", func(t *testing.T) {
		vfdtest.TestDriverConfig(t, func(t *testing.T) (vfd.Driver, string) {
			return vfd.NewSplit(vfd.Sec2{}, "", vfd.Sec2{}, ""), t.TempDir()
		}, cfg)
	})
	t.Run("two cores", func(t *testing.T) {
		vfdtest.TestDriverConfig(t, func(t *testing.T) (vfd.Driver, string) {
			return vfd.NewSplit(vfd.NewCore(), "", vfd.NewCore(), ""), "/"
		}, cfg)
	})
}
