package main

// The Fortran tests: capi/build.sh builds libftigo.so with the Fortran
// module's procedures and fti.mod per MPI flavour, Fortran programs from
// testdata/ are compiled with the flavour's mpifort against them and run
// under its mpirun. They skip without the Fortran compilers and fail
// instead under FTIGO_REQUIRE_TOOLS=1.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// needFortran skips (or fails under FTIGO_REQUIRE_TOOLS=1) without f's
// Fortran compiler and gfortran (cgo compiles the module with it).
func needFortran(t testing.TB, f flavour) {
	t.Helper()
	needTools(t, f, false)
	testutil.NeedTool(t, f.fc, "compiles the Fortran tests against fti.mod ("+f.name+")")
	testutil.NeedTool(t, "gfortran", "compiles the Fortran module into libftigo.so")
}

// fortranOut returns the output directory of f's build.sh (see
// buildOut), which has fti.mod once needFortran found the compilers.
func fortranOut(t testing.TB, f flavour) string {
	out := buildOut(t, f)
	_, err := os.Stat(filepath.Join(out, "include", "fti.mod"))
	require.NoError(t, err, "build.sh built no Fortran module for %s", f.name)
	return out
}

// fprogram compiles testdata/src with f's mpifort and the README's link line.
func fprogram(t testing.TB, f flavour, src string) string {
	out := fortranOut(t, f)
	return cached(t, f.name+"/f/"+src, func() (string, error) {
		exe := filepath.Join(out, strings.TrimSuffix(src, filepath.Ext(src)))
		inc, lib := filepath.Join(out, "include"), filepath.Join(out, "lib")
		return exe, run(f.fc, "-O2", "-Wall", "-I"+inc, filepath.Join("testdata", src), "-L"+lib, "-lftigo", "-Wl,-rpath,"+lib, "-o", exe)
	})
}

// TestFortranGenerated checks the checked-in Fortran files are gen.go's output.
func TestFortranGenerated(t *testing.T) {
	for file, args := range map[string][]string{"fortran/fti.f90": nil, "testdata/ftypes.f90": {"types"}} {
		cmd := exec.Command(goTool(), append([]string{"run", "fortran/gen.go"}, args...)...)
		want, err := cmd.Output()
		require.NoError(t, err)
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "%s is stale: go run capi/fortran/gen.go %s > capi/%s", file, strings.Join(args, " "), file)
	}
}

// TestFortranHeatKillLoseNode is the kill scenario with the Fortran solver:
// SIGKILLed while its L4 checkpoint is written, a node's local storage
// lost, relaunched from the L3 checkpoint, it ends bit-identical to the C
// solver's uninterrupted run.
func TestFortranHeatKillLoseNode(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		needFortran(t, f)
		killLoseNode(t, f, fprogram(t, f, "fheat.f90"))
	})
}

// TestFortranHeatHeads runs the Fortran solver after plain MPI_Init with
// FTI's heads post-processing its L2-L4 checkpoints (MPI_THREAD_SINGLE).
func TestFortranHeatHeads(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		needFortran(t, f)
		out := heatBackground(t, f, fprogram(t, f, "fheat.f90"), 4, 2,
			"head = 1\nnode_size = 2\ngroup_size = 2\ninline_l2 = 0\ninline_l3 = 0\ninline_l4 = 0", false)
		for id := 1; id <= 3; id++ {
			assert.Contains(t, out, fmt.Sprintf("Ckpt. ID %d (L1 -> L%d) post-processed by the heads", id, id+1))
		}
	})
}

// TestFortranTypes protects a variable of every intrinsic type, kind and
// rank 0..7 of the module (and one grown by FTI_Realloc), checkpoints,
// recovers every byte in a second run, and reads the checkpoint from Go:
// the numeric kinds are stored typed (REAL8 as float64, COMPLEX4 as
// complex64 ...), the others as opaque elements of their size.
func TestFortranTypes(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		needFortran(t, f)
		dir := t.TempDir()
		cfg := writeConfig(t, dir, 1, "max_var_id = 1000")
		prog := fprogram(t, f, "ftypes.f90")
		out, err := mpirun(t, f, 1, prog, cfg, "write")
		require.NoError(t, err, "%s", out)
		assert.Equal(t, 18*8+3, checks(t, out))
		run, err := openRun(dir)
		require.NoError(t, err)
		require.Len(t, run.ckpts, 1)
		vars, err := run.vars(run.ckpts[0].Seq, 0)
		require.NoError(t, err)
		byID := map[int32]offlineVar{}
		for _, v := range vars {
			byID[v.ID] = v
		}
		// Ids are 1 + 8*type + rank in gen.go's type order.
		for typ, want := range map[int]struct {
			name string
			size uint32
		}{0: {"uint8", 1}, 1: {"struct", 4}, 2: {"complex64", 8}, 3: {"complex128", 16}, 4: {"struct", 32},
			5: {"int8", 1}, 6: {"int16", 2}, 7: {"int32", 4}, 8: {"int64", 8}, 9: {"struct", 16},
			10: {"struct", 1}, 14: {"struct", 16}, 15: {"float32", 4}, 16: {"float64", 8}, 17: {"struct", 16}} {
			for rank := 0; rank <= 7; rank++ {
				v, ok := byID[int32(1+8*typ+rank)]
				require.True(t, ok, "type %d rank %d stored", typ, rank)
				count := int64(1)
				if rank > 0 {
					count = 3 << (rank - 1)
				}
				assert.Equal(t, want.name, v.Type, "type %d rank %d", typ, rank)
				assert.Equal(t, want.size, v.ElemSize, "type %d rank %d", typ, rank)
				assert.Equal(t, count, v.Count, "type %d rank %d", typ, rank)
			}
		}
		assert.Equal(t, int64(10), byID[999].Count, "grow as written")

		out, err = mpirun(t, f, 1, prog, cfg, "read")
		require.NoError(t, err, "%s", out)
		assert.Equal(t, 2*18*8+8, checks(t, out), "protect and recover every variable")
		assert.Contains(t, out, "FAILURES 0\n")

	})
}

// TestFortranCallForms runs testdata/fcalls.f90 on 2 ranks: named ids,
// an incremental checkpoint opened with a logical, and a restart that
// recovers variable by variable between FTI_RecoverVarInit and
// FTI_RecoverVarFinalize called without an argument, as FTI's Fortran
// codes call them (and with err).
func TestFortranCallForms(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		needFortran(t, f)
		cfg := writeConfig(t, t.TempDir(), 2, "")
		prog := fprogram(t, f, "fcalls.f90")
		for _, run := range []struct {
			mode   string
			checks int
		}{{"write", 9}, {"read", 13}} {
			out, err := mpirun(t, f, 2, prog, cfg, run.mode)
			require.NoError(t, err, "%s", out)
			assert.Equal(t, 2*run.checks, checks(t, out), "%s: %s", run.mode, out)
			assert.Equal(t, 2, strings.Count(out, "FAILURES 0\n"), "%s: %s", run.mode, out)
		}
	})
}

// TestFortranInterop: Fortran, C and Go restart from each other's
// checkpoints. Fortran checkpoints and dies; Go recovers it (the state of
// the C solver's uninterrupted run at that iteration) and checkpoints
// again; the Fortran solver restarts from Go's checkpoint, the C solver
// from Fortran's, and Fortran from C's, each ending bit-identical to the C
// solver's uninterrupted run.
func TestFortranInterop(t *testing.T) {
	forEachFlavour(t, false, func(t *testing.T, f flavour) {
		needFortran(t, f)
		np := f.np
		nx, rows := heatSize(np)
		fheat, cheat := fprogram(t, f, "fheat.f90"), program(t, f, "heatdis.c")
		root := t.TempDir()
		ref300, ref600 := filepath.Join(root, "ref300"), filepath.Join(root, "ref600")
		heat(t, f, np, writeConfig(t, ref300, np, ""), filepath.Join(ref300, "out"), nx, rows, 300, 0, "0")
		heat(t, f, np, writeConfig(t, ref600, np, ""), filepath.Join(ref600, "out"), nx, rows, 600, 0, "0")
		want300, want600 := readAll(t, filepath.Join(ref300, "out"), np), readAll(t, filepath.Join(ref600, "out"), np)
		same := func(dir string, want [][]byte, what string) {
			t.Helper()
			got := readAll(t, dir, np)
			for r := range want {
				assert.True(t, bytes.Equal(want[r], got[r]), "%s: rank %d's field differs from the C solver's", what, r)
			}
		}

		// Fortran writes, Go reads and writes, Fortran reads.
		dir := filepath.Join(root, "fgo")
		cfgPath := writeConfig(t, dir, np, "")
		heatProg(t, f, fheat, np, cfgPath, filepath.Join(dir, "out1"), nx, rows, 350, 100, "123", "crash")
		same(filepath.Join(dir, "out1"), readAllIters(t, f, np, nx, rows, 350, root), "Fortran at 350")
		cfg, err := ckpt.LoadConfig(vfd.Sec2{}, cfgPath)
		require.NoError(t, err)
		require.NoError(t, comm.Run(np, func(c comm.Comm) error {
			rt, err := ckpt.Init(cfg, c)
			if err != nil {
				return err
			}
			defer endRuntime(rt)
			iter := make([]int32, 1)
			grid := make([]float64, (rows+2)*nx)
			if err := errorsJoin(ckpt.Protect(rt, 0, &iter), ckpt.Protect(rt, 1, &grid)); err != nil {
				return err
			}
			if err := rt.Recover(); err != nil {
				return err
			}
			if iter[0] != 300 || !bytes.Equal(f64bytes(grid[nx:(rows+1)*nx]), want300[c.Rank()]) {
				return fmt.Errorf("rank %d: Go recovered iteration %d of Fortran's checkpoint, not the C solver's state at 300", c.Rank(), iter[0])
			}
			return rt.Checkpoint(40, 1)
		}))
		out := heatProg(t, f, fheat, np, cfgPath, filepath.Join(dir, "out2"), nx, rows, 600, 100, "123")
		assert.Contains(t, out, "This is a restart. Recovering successfully from level 1 with Ckpt. 40 (ckpt")
		same(filepath.Join(dir, "out2"), want600, "Fortran from Go's checkpoint")

		// Fortran writes, C reads.
		dir = filepath.Join(root, "fc")
		cfgPath = writeConfig(t, dir, np, "")
		heatProg(t, f, fheat, np, cfgPath, filepath.Join(dir, "out1"), nx, rows, 350, 100, "123", "crash")
		out = heatProg(t, f, cheat, np, cfgPath, filepath.Join(dir, "out2"), nx, rows, 600, 100, "123")
		assert.Contains(t, out, "This is a restart. Recovering successfully from level 3 with Ckpt. 3 (ckpt")
		same(filepath.Join(dir, "out2"), want600, "C from Fortran's checkpoint")

		// C writes, Fortran reads.
		dir = filepath.Join(root, "cf")
		cfgPath = writeConfig(t, dir, np, "")
		heatProg(t, f, cheat, np, cfgPath, filepath.Join(dir, "out1"), nx, rows, 350, 100, "123", "crash")
		out = heatProg(t, f, fheat, np, cfgPath, filepath.Join(dir, "out2"), nx, rows, 600, 100, "123")
		assert.Contains(t, out, "This is a restart. Recovering successfully from level 3 with Ckpt. 3 (ckpt")
		same(filepath.Join(dir, "out2"), want600, "Fortran from C's checkpoint")
	})
}

// readAllIters returns the C solver's fields after iters iterations.
func readAllIters(t *testing.T, f flavour, np, nx, rows, iters int, root string) [][]byte {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprintf("ref%d", iters))
	heat(t, f, np, writeConfig(t, dir, np, ""), filepath.Join(dir, "out"), nx, rows, iters, 0, "0")
	return readAll(t, filepath.Join(dir, "out"), np)
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
