package main

// The Python tests: python/ is installed with pip (--no-build-isolation,
// Debian's setuptools) for each MPI and for none, and its pytest suite
// runs under /usr/bin/python3; then the numpy solver and the C solver
// restart from each other's checkpoints. They skip without the tools and
// fail instead under FTIGO_REQUIRE_TOOLS=1.

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
)

const python = "/usr/bin/python3"

// needPython skips without Debian's python3, numpy, pytest and setuptools
// (mpi4py too when mpi4py is set).
func needPython(t testing.TB, mpi4py bool) {
	t.Helper()
	testutil.NeedTool(t, python, "runs the Python package's tests")
	mods := "numpy, pytest, setuptools, pip"
	if mpi4py {
		mods += ", mpi4py"
	}
	if out, err := exec.Command(python, "-c", "import "+mods).CombinedOutput(); err != nil {
		testutil.Missing(t, "python3 lacks "+mods+" (apt install python3-numpy python3-pytest python3-setuptools python3-pip python3-mpi4py): "+string(out))
	}
}

// pyInstall installs python/ for mpi (openmpi, mpich, none) into a
// directory for PYTHONPATH. For none pip builds libftigo (build.sh);
// for an MPI it bundles the library the C tests use (FTIGO_LIB).
func pyInstall(t testing.TB, mpi string) string {
	env := []string{"FTIGO_MPI=" + mpi, "GO=" + goTool(), "PIP_NO_INDEX=1"}
	for _, f := range flavours {
		if f.name == mpi {
			env = append(env, "FTIGO_LIB="+filepath.Join(libDir(t, f), "libftigo.so"))
		}
	}
	return cached(t, "python/"+mpi, func() (string, error) {
		dir := filepath.Join(buildDir, "py-"+mpi)
		cmd := exec.Command(python, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--target", dir, "../python")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", &exec.Error{Name: "pip install (" + mpi + "): " + string(out), Err: err}
		}
		return dir, nil
	})
}

// pytest runs the suite against the package in dir.
func pytest(t *testing.T, dir string, env ...string) string {
	t.Helper()
	cmd := exec.Command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "../python/tests")
	cmd.Env = append(append(os.Environ(), "PYTHONPATH="+dir), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

// TestPythonPackage runs the pytest suite for the serial library, for
// Open MPI (with mpi4py: the numpy solver on 2 ranks, a restart on
// another rank count) and for MPICH (Debian's mpi4py is Open MPI's: one
// rank, ftigo initialising MPI).
func TestPythonPackage(t *testing.T) {
	t.Run("none", func(t *testing.T) {
		needPython(t, false)
		out := pytest(t, pyInstall(t, "none"))
		assert.Contains(t, out, "3 passed, 1 skipped")
	})
	t.Run("openmpi", func(t *testing.T) {
		needPython(t, true)
		needTools(t, flavours[0], false)
		out := pytest(t, pyInstall(t, "openmpi"))
		assert.Contains(t, out, "4 passed")
	})
	t.Run("mpich", func(t *testing.T) {
		needPython(t, false)
		needTools(t, flavours[1], false)
		out := pytest(t, pyInstall(t, "mpich"), "FTIGO_NO_MPI4PY=1")
		assert.Contains(t, out, "3 passed, 1 skipped")
	})
}

// TestPythonInterop: under Open MPI the numpy solver restarts from the C
// solver's checkpoint, and the C solver from the numpy solver's, each
// ending bit-identical to the C solver's uninterrupted run.
func TestPythonInterop(t *testing.T) {
	needPython(t, true)
	f := flavours[0]
	needTools(t, f, false)
	dir := pyInstall(t, "openmpi")
	t.Setenv("PYTHONPATH", dir)
	f.runArgs = append(append([]string(nil), f.runArgs...), "-x", "PYTHONPATH")
	np, nx, rows := 2, 256, 64
	pyheat := filepath.Join(t.TempDir(), "pyheat")
	heatPy, err := filepath.Abs("../python/tests/heat.py")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(pyheat, []byte("#!/bin/sh\nexec "+python+" "+heatPy+" \"$@\"\n"), 0o755))
	cheat := program(t, f, "heatdis.c")
	root := t.TempDir()
	ref := filepath.Join(root, "ref")
	heat(t, f, np, writeConfig(t, ref, np, ""), filepath.Join(ref, "out"), nx, rows, 600, 0, "0")
	want := readAll(t, filepath.Join(ref, "out"), np)
	for _, c := range []struct{ name, first, second string }{{"c-then-python", cheat, pyheat}, {"python-then-c", pyheat, cheat}} {
		t.Run(c.name, func(t *testing.T) {
			d := filepath.Join(root, c.name)
			cfg := writeConfig(t, d, np, "")
			heatProg(t, f, c.first, np, cfg, filepath.Join(d, "out1"), nx, rows, 350, 100, "123", "crash")
			out := heatProg(t, f, c.second, np, cfg, filepath.Join(d, "out2"), nx, rows, 600, 100, "123")
			assert.Contains(t, out, "This is a restart. Recovering successfully from level 3 with Ckpt. 3 (ckpt")
			got := readAll(t, filepath.Join(d, "out2"), np)
			for r := range want {
				assert.True(t, string(want[r]) == string(got[r]), "rank %d's field differs from the C solver's", r)
			}
		})
	}
}
