package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
)

// elementBits is global.c's bits(): splitmix64 of a dataset's seed and
// an element's global index.
func elementBits(seed, i uint64) uint64 {
	z := seed*0x100000000 + i + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// globalWant returns the bytes global.c's datasets hold, little-endian
// as h5dump -b LE writes them.
func globalWant() map[string][]byte {
	const ny, nx, c0, c1, c2 = 13, 7, 3, 10, 4
	temp := make([]byte, 0, ny*nx*8)
	for i := range uint64(ny * nx) {
		temp = binary.LittleEndian.AppendUint64(temp, elementBits(1, i))
	}
	counts := make([]byte, 0, c0*c1*c2*4)
	for i := range uint64(c0 * c1 * c2) {
		counts = binary.LittleEndian.AppendUint32(counts, uint32(elementBits(2, i)))
	}
	return map[string][]byte{
		"/fields/temperature": temp,
		"/counts":             counts,
		"/iteration":          binary.LittleEndian.AppendUint64(nil, 4242),
	}
}

// TestGlobalDatasetsOtherRankCount runs global.c three times on the
// same directories with three rank counts: N ranks define three global
// datasets (1-D, 2-D, 3-D, uneven decompositions, one rank mapping a
// value the others map no element of) and checkpoint at L4 (Open MPI: a
// SIONlib container; MPICH: ckpt_io = 5, one HDF5 file); M ranks restart
// from L4 (status 1), learn the shapes with FTI_RecoverDatasetDimension,
// size a variable with FTI_GetStoredSize and FTI_Realloc, recover every
// element bit for bit with FTI_Recover and take a level-9 HDF5
// checkpoint; K ranks restart from that file (status 3) with
// FTI_RecoverVar and finalize. h5dump then reads each dataset of the
// HDF5 files equal to the stitched data.
func TestGlobalDatasetsOtherRankCount(t *testing.T) {
	counts := map[string][3]int{"openmpi": {4, 3, 2}, "mpich": {2, 3, 1}}
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		n := counts[f.name]
		extra := "h5_single_file_enable = 1"
		if f.name == "mpich" {
			extra += "\nckpt_io = 5"
		}
		dir := t.TempDir()
		prog := program(t, f, "global.c")
		phase := func(np int, mode string, want ...string) {
			t.Helper()
			cfg := writeConfig(t, dir, np, extra)
			out, err := mpirun(t, f, np, prog, cfg, mode)
			require.NoError(t, err, "%s", out)
			assert.Greater(t, checks(t, out), 15*np, "%s on %d ranks", mode, np)
			assert.Equal(t, np, strings.Count(out, "FAILURES 0\n"), "%s on %d ranks:\n%s", mode, np, out)
			for _, w := range want {
				assert.Contains(t, out, w)
			}
		}
		phase(n[0], "write")
		var files []string
		if f.name == "mpich" {
			// The L4 checkpoint is an HDF5 file too; keep a copy to read.
			h5, err := filepath.Glob(filepath.Join(dir, "global", "*", "ckpt00000001", "l4.h5")) // in the run's directory
			require.NoError(t, err)
			require.Len(t, h5, 1, "ckpt_io = 5 writes L4 as l4.h5")
			b, err := os.ReadFile(h5[0])
			require.NoError(t, err)
			l4 := filepath.Join(t.TempDir(), "l4.h5")
			require.NoError(t, os.WriteFile(l4, b, 0o644))
			files = append(files, l4)
		}
		phase(n[1], "reshape", fmt.Sprintf("written by %d ranks, redistributed on %d", n[0], n[1]),
			fmt.Sprintf("RECOVERED rank=%d of %d", n[1]-1, n[1]))
		phase(n[2], "vpr", fmt.Sprintf("Recovering successfully from level 9 with Ckpt. 2 (%s, written by %d ranks) in ",
			filepath.Join(dir, "global", "VPR-h5-ID00000002.h5"), n[1]))

		h5 := testutil.NeedTool(t, "h5dump", "reads the HDF5 files written through the C API")
		vpr, err := filepath.Glob(filepath.Join(dir, "global", "VPR-h5-*.h5"))
		require.NoError(t, err)
		require.Len(t, vpr, 1, "the level-9 file stays after FTI_Finalize, as in FTI")
		for _, file := range append(files, vpr[0]) {
			for name, want := range globalWant() {
				bin := filepath.Join(t.TempDir(), "out.bin")
				out, err := exec.Command(h5, "-d", name, "-b", "LE", "-o", bin, file).CombinedOutput()
				require.NoError(t, err, "h5dump %s %s: %s", name, file, out)
				got, err := os.ReadFile(bin)
				require.NoError(t, err)
				assert.Equal(t, want, got, "dataset %s of %s", name, file)
			}
		}
	})
}
