package vfd_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/vfd"
)

// TestStackedDriversSyncIsDurable checks that every wrapping driver
// passes Sync and SyncDir down: over a core, what was synced survives a
// crash clone and what was written after it does not.
func TestStackedDriversSyncIsDurable(t *testing.T) {
	stacks := []struct {
		name string
		wrap func(vfd.Driver) vfd.Driver
		file string
	}{
		{"core", func(d vfd.Driver) vfd.Driver { return d }, "f"},
		{"stdio", func(d vfd.Driver) vfd.Driver { return vfd.NewStdio(d, 1<<16) }, "f"},
		{"family", func(d vfd.Driver) vfd.Driver { return vfd.NewFamily(d, 1000) }, "f-%d"},
		{"split", func(d vfd.Driver) vfd.Driver { return vfd.NewSplit(d, "", d, "") }, "f"},
		{"log", func(d vfd.Driver) vfd.Driver { return vfd.NewLog(d, nil) }, "f"},
		{"fault", func(d vfd.Driver) vfd.Driver { return vfd.NewFault(d) }, "f"},
		{"stdio over family", func(d vfd.Driver) vfd.Driver { return vfd.NewStdio(vfd.NewFamily(d, 1000), 1<<16) }, "f-%d"},
	}
	for _, st := range stacks {
		t.Run(st.name, func(t *testing.T) {
			c := vfd.NewCore()
			require.NoError(t, c.MkdirAll("dir", 0o755))
			require.NoError(t, c.SyncDir("/"))
			d := st.wrap(c)
			name := "dir/" + st.file
			f, err := vfd.Create(d, name)
			require.NoError(t, err)
			synced := pattern(2500)
			_, err = f.WriteAt(synced, 0)
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			require.NoError(t, d.SyncDir("dir"))
			_, err = f.WriteAt([]byte("after the sync"), 100)
			require.NoError(t, err)

			got, err := vfd.ReadFile(st.wrap(c.CrashClone()), name)
			require.NoError(t, err)
			assert.Equal(t, synced, got)

			require.NoError(t, f.Close())
			got, err = vfd.ReadFile(d, name)
			require.NoError(t, err)
			assert.Equal(t, "after the sync", string(got[100:114]), "live view has the later write")
		})
	}
}
