package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSetSnapshotFromC runs snapshot.c under both MPIs at L1 to L4:
// ftigo_set_snapshot turns snapshot mode on before FTI_Init (config.fti
// leaves it off), the checkpoint is written in the background (rank 0's
// log says so), the array overwritten right after FTI_Checkpoint never
// reaches it, and a restart recovers every element as at the call.
func TestSetSnapshotFromC(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		prog := program(t, f, "snapshot.c")
		for lvl := 1; lvl <= 4; lvl++ {
			t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
				const np = 4
				dir := t.TempDir()
				cfg := writeConfig(t, dir, np, "keep_last_ckpt = 1")
				out, err := mpirun(t, f, np, prog, cfg, "write", fmt.Sprint(lvl))
				require.NoError(t, err, "%s", out)
				assert.Equal(t, 8*np, checks(t, out))
				assert.Contains(t, out, "written in the background", "snapshot mode was not on:\n%s", out)
				out, err = mpirun(t, f, np, prog, cfg, "read")
				require.NoError(t, err, "%s", out)
				assert.Equal(t, 7*np, checks(t, out))
				assert.Equal(t, np, strings.Count(out, "FAILURES 0\n"), "%s", out)
			})
		}
	})
}

// TestSetSnapshotICPFromC runs snapshot.c's icp mode under both MPIs at
// L2 and L4: in snapshot mode FTI_AddVarICP copies the array, which the
// program overwrites right after it and again after FTI_FinalizeICP;
// the checkpoint is written in the background (rank 0's log says so), and
// a restart recovers every element as at FTI_AddVarICP.
func TestSetSnapshotICPFromC(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		prog := program(t, f, "snapshot.c")
		for _, lvl := range []int{2, 4} {
			t.Run(fmt.Sprintf("L%d", lvl), func(t *testing.T) {
				const np = 4
				dir := t.TempDir()
				cfg := writeConfig(t, dir, np, "keep_last_ckpt = 1")
				out, err := mpirun(t, f, np, prog, cfg, "icp", fmt.Sprint(lvl))
				require.NoError(t, err, "%s", out)
				assert.Equal(t, 10*np, checks(t, out))
				assert.Contains(t, out, "copied incrementally", "the iCP was not staged:\n%s", out)
				assert.Contains(t, out, "written in the background", "snapshot mode was not on:\n%s", out)
				out, err = mpirun(t, f, np, prog, cfg, "read")
				require.NoError(t, err, "%s", out)
				assert.Equal(t, 7*np, checks(t, out))
				assert.Equal(t, np, strings.Count(out, "FAILURES 0\n"), "%s", out)
			})
		}
	})
}
