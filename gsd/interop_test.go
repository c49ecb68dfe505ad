package gsd

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// needGSD returns /usr/bin/python3 when python3-gsd and numpy are
// importable (skip, or fail with FTIGO_REQUIRE_TOOLS=1, otherwise).
func needGSD(t testing.TB) string {
	t.Helper()
	return testutil.NeedPython(t, "gsd", "gsd.fl", "gsd.pygsd", "gsd.hoomd", "numpy")
}

func script(name string) string {
	p, _ := filepath.Abs(filepath.Join("testdata", name))
	return p
}

func runPy(t testing.TB, py string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(py, args...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

type pyDump struct {
	Version       []int    `json:"version"`
	Application   string   `json:"application"`
	Schema        string   `json:"schema"`
	SchemaVersion []int    `json:"schema_version"`
	NFrames       uint64   `json:"nframes"`
	Names         []string `json:"names"`
	Chunks        [][]any  `json:"chunks"`
}

// pyResult is what gsd_dump.py reports for one file.
type pyResult struct {
	Valid  bool   `json:"valid"`
	Report string `json:"report"`
	Error  string `json:"error"`
	FL     pyDump `json:"fl"`
	PyGSD  pyDump `json:"pygsd"`
}

// pyCheck runs validate_gsd.py and reads every file with python3-gsd
// (gsd.fl and gsd.pygsd) in one interpreter.
func pyCheck(t *testing.T, py string, names ...string) map[string]pyResult {
	t.Helper()
	out, err := runPy(t, py, append([]string{script("gsd_dump.py"), "--validate"}, names...)...)
	require.NoError(t, err, "gsd_dump.py:\n%s", out)
	var res map[string]pyResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	return res
}

// sameAsPython validates name and asserts that python3-gsd (gsd.fl and
// gsd.pygsd) and our Reader see identical metadata, names and chunk
// bytes, dtypes and shapes. It returns the number of chunks compared.
func sameAsPython(t *testing.T, py, name string) int {
	t.Helper()
	return samePy(t, pyCheck(t, py, name)[name], name)
}

func samePy(t *testing.T, res pyResult, name string) int {
	t.Helper()
	require.True(t, res.Valid, "%s: validate_gsd.py:\n%s", name, res.Report)
	require.Contains(t, res.Report, "\nVALID")
	require.Empty(t, res.Error)
	dumps := map[string]pyDump{"fl": res.FL, "pygsd": res.PyGSD}
	r, err := Open(vfd.Sec2{}, name)
	require.NoError(t, err)
	defer r.Close()
	h := r.Header()
	n := 0
	for _, lib := range []string{"fl", "pygsd"} {
		d, ok := dumps[lib]
		require.True(t, ok, lib)
		assert.Equal(t, []int{int(h.GSDVersion.Major()), int(h.GSDVersion.Minor())}, d.Version, lib)
		assert.Equal(t, h.Application, d.Application, lib)
		assert.Equal(t, h.Schema, d.Schema, lib)
		assert.Equal(t, []int{int(h.SchemaVersion.Major()), int(h.SchemaVersion.Minor())}, d.SchemaVersion, lib)
		assert.Equal(t, r.NFrames(), d.NFrames, lib)
		assert.Equal(t, r.ChunkNames(""), d.Names, lib)
		type key struct {
			f uint64
			n string
		}
		theirs := map[key][]any{}
		for _, c := range d.Chunks {
			theirs[key{uint64(c[0].(float64)), c[1].(string)}] = c
		}
		ours := 0
		for f := uint64(0); f < r.NFrames(); f++ {
			for _, nm := range r.ChunkNames("") {
				if !r.ChunkExists(f, nm) {
					continue
				}
				ours++
				c, ok := theirs[key{f, nm}]
				if !assert.True(t, ok, "%s misses frame %d %s", lib, f, nm) {
					continue
				}
				data, e, err := r.ReadChunkRaw(f, nm)
				require.NoError(t, err)
				assert.Equal(t, e.Type.String(), c[2], "%s dtype frame %d %s", lib, f, nm)
				shape := []any{float64(e.N)}
				if e.M > 1 {
					shape = append(shape, float64(e.M))
				}
				assert.Equal(t, shape, c[3], "%s shape frame %d %s", lib, f, nm)
				assert.Equal(t, hex.EncodeToString(data), c[4], "%s bytes frame %d %s", lib, f, nm)
			}
		}
		assert.Equal(t, len(d.Chunks), ours, "%s chunk count", lib)
		n = ours
	}
	return n
}

func writeAllTypes(t *testing.T, name string) {
	w, err := Create(sec2, name, "ftigo interop", "interop", MakeVersion(1, 3), WithSync(false))
	require.NoError(t, err)
	for f := 0; f < 5; f++ {
		k := f + 1
		require.NoError(t, WriteChunk(w, "u8", []uint8{0, 255, uint8(k)}, 3, 1))
		require.NoError(t, WriteChunk(w, "u16", []uint16{65535, uint16(k)}, 1, 2))
		require.NoError(t, WriteChunk(w, "u32", []uint32{math.MaxUint32, uint32(k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "u64", []uint64{math.MaxUint64, uint64(k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "i8", []int8{-128, 127, int8(-k)}, 3, 1))
		require.NoError(t, WriteChunk(w, "i16", []int16{-32768, int16(-k)}, 2, 1))
		if f != 2 {
			require.NoError(t, WriteChunk(w, "i32", []int32{math.MinInt32, int32(-k)}, 2, 1))
		}
		require.NoError(t, WriteChunk(w, "i64", []int64{math.MinInt64, int64(-k)}, 2, 1))
		require.NoError(t, WriteChunk(w, "f32", []float32{float32(math.Inf(1)), float32(k), -0.25, 3, 4, 5}, 2, 3))
		require.NoError(t, WriteChunk(w, "f64", []float64{math.Pi, float64(k), math.SmallestNonzeroFloat64, -0}, 1, 4))
		require.NoError(t, WriteChunk(w, "long/"+strings.Repeat("ü", 200), []uint8{uint8(f)}, 1, 1))
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, w.Close())
}

func TestInteropPythonReadsOurFiles(t *testing.T) {
	t.Parallel()
	py := needGSD(t)
	dir := t.TempDir()
	file := func(n string) string { return filepath.Join(dir, n) }

	// Written by us: every type, a chunk missing in one frame, a 400-byte
	// UTF-8 name.
	writeAllTypes(t, file("types.gsd"))

	// Index and namelist grown past their first blocks, long names.
	w, err := Create(sec2, file("grow.gsd"), "ftigo", "grow", MakeVersion(1, 0), WithSync(false))
	require.NoError(t, err)
	for f := 0; f < 300; f++ {
		require.NoError(t, WriteChunk(w, "frame", []uint32{uint32(f)}, 1, 1))
		if f < 60 {
			require.NoError(t, WriteChunk(w, fmt.Sprintf("n/%02d/%s", f, strings.Repeat("y", 3*f)), []float64{float64(f)}, 1, 1))
		}
		require.NoError(t, w.EndFrame())
	}
	require.NoError(t, w.Close())
	r, err := Open(sec2, file("grow.gsd"))
	require.NoError(t, err)
	h := r.Header()
	require.NoError(t, r.Close())
	require.Greater(t, h.IndexAllocated, uint64(256))
	require.Greater(t, h.NameAllocated, uint64(16))

	// Appended by us.
	writeAllTypes(t, file("append.gsd"))
	w, err = OpenAppend(sec2, file("append.gsd"), WithSync(false))
	require.NoError(t, err)
	require.NoError(t, WriteChunk(w, "u8", []uint8{42}, 1, 1))
	require.NoError(t, WriteChunk(w, "added/by/ftigo", []int32{1, 2, 3}, 3, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())

	// Left by a writer whose power was cut at its 10th fsync.
	core := vfd.NewCore()
	committed, err := crashWorkload(vfd.NewFault(core, vfd.OnNth(vfd.OpSync, 9, nil)), "t.gsd", 20)
	require.ErrorIs(t, err, vfd.ErrInjected)
	_, err = vfd.CopyFile(sec2, file("killed.gsd"), core.CrashClone(), "t.gsd", 0)
	require.NoError(t, err)

	// Cut by one byte (python refuses it), and the same file repaired.
	writeAllTypes(t, file("cut.gsd"))
	st, err := os.Stat(file("cut.gsd"))
	require.NoError(t, err)
	require.NoError(t, os.Truncate(file("cut.gsd"), st.Size()-1))
	_, err = vfd.CopyFile(sec2, file("repaired.gsd"), sec2, file("cut.gsd"), 0)
	require.NoError(t, err)
	res, err := Repair(sec2, file("repaired.gsd"))
	require.NoError(t, err)
	assert.Equal(t, uint64(4), res.Frames)

	// A 1.0 file and its upgrade.
	require.NoError(t, os.WriteFile(file("v1.gsd"), buildV1(3, []string{"alpha", "beta", "gamma"}), 0o644))
	_, err = vfd.CopyFile(sec2, file("upgraded.gsd"), sec2, file("v1.gsd"), 0)
	require.NoError(t, err)
	require.NoError(t, Upgrade(sec2, file("upgraded.gsd")))

	all := []string{"types.gsd", "grow.gsd", "append.gsd", "killed.gsd", "cut.gsd", "repaired.gsd", "v1.gsd", "upgraded.gsd"}
	paths := make([]string, len(all))
	for i, n := range all {
		paths[i] = file(n)
	}
	results := pyCheck(t, py, paths...)
	assert.Contains(t, results[file("cut.gsd")].Error, "Corrupt GSD file", "python3-gsd refuses a truncated file")
	assert.False(t, results[file("cut.gsd")].Valid)
	for _, n := range all {
		if n == "cut.gsd" {
			continue
		}
		t.Run(n, func(t *testing.T) {
			got := samePy(t, results[file(n)], file(n))
			switch n {
			case "types.gsd":
				assert.Equal(t, 5*11-1, got)
			case "grow.gsd":
				assert.Equal(t, 360, got)
			case "killed.gsd":
				assert.GreaterOrEqual(t, int(results[file(n)].FL.NFrames), committed)
			}
		})
	}

	// gsd.fl appends to our appended file, and we append after it.
	out, err := runPy(t, py, "-c", `import sys,gsd.fl,numpy as np
f=gsd.fl.open(name=sys.argv[1],mode='ab');n=f.nframes
f.write_chunk(name='peer/appended',data=np.arange(3,dtype=np.int32));f.end_frame();f.close()
print(n)`, file("append.gsd"))
	require.NoError(t, err, out)
	assert.Equal(t, "6\n", out)
	w, err = OpenAppend(sec2, file("append.gsd"), WithSync(false))
	require.NoError(t, err)
	assert.Equal(t, uint64(7), w.Frame())
	require.NoError(t, WriteChunk(w, "peer/appended", []int32{7}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	r, err = Open(sec2, file("append.gsd"))
	require.NoError(t, err)
	v, _, err := ReadChunk[int32](r, 6, "peer/appended")
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 2}, v)
	require.NoError(t, r.Close())
	sameAsPython(t, py, file("append.gsd"))
}

func TestInteropWeReadPythonFiles(t *testing.T) {
	t.Parallel()
	py := needGSD(t)
	name := filepath.Join(t.TempDir(), "py.gsd")
	out, err := runPy(t, py, script("gsd_write.py"), name, "150")
	require.NoError(t, err, out)
	require.NoError(t, Verify(sec2, name))
	r, err := Open(sec2, name)
	require.NoError(t, err)
	require.Equal(t, uint64(150), r.NFrames())
	v, _, err := ReadChunk[float64](r, 149, "typed/float64")
	require.NoError(t, err)
	require.Len(t, v, 60)
	assert.Equal(t, float64(150+9), v[1])
	require.NoError(t, r.Close())
	// And we can append to a file the reference wrote.
	w, err := OpenAppend(sec2, name, WithSync(false))
	require.NoError(t, err)
	require.NoError(t, WriteChunk(w, "frame", []uint64{150}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	files := []string{name}
	if _, err := os.Stat(shippedV1); err == nil {
		files = append(files, shippedV1)
	}
	results := pyCheck(t, py, files...)
	samePy(t, results[name], name)
	if len(files) > 1 {
		assert.Equal(t, 5*127, samePy(t, results[shippedV1], shippedV1))
	}
}

func TestInteropHOOMD(t *testing.T) {
	t.Parallel()
	py := needGSD(t)
	name := filepath.Join(t.TempDir(), "hoomd.gsd")
	hw, err := CreateHOOMD(sec2, name, "ftigo-test", WithSync(false))
	require.NoError(t, err)
	const n = 4
	box := [6]float32{10, 10, 0, 0, 0, 0}
	pos := make([]float32, 3*n)
	for i := range pos {
		pos[i] = float32(i)
	}
	np := uint32(n)
	require.NoError(t, hw.WriteFrame(&HOOMDFrame{Step: 0, Dimensions: 2, Box: &box, N: &np,
		Types: []string{"A", "cell"}, TypeID: []uint32{0, 1, 1, 0}, Position: pos,
		Log: map[string]any{"particles/temperature": []float32{1, 2, 3, 4}, "energy": []float64{-1.5}}}))
	for s := 1; s < 3; s++ {
		require.NoError(t, hw.WriteFrame(&HOOMDFrame{Step: uint64(100 * s),
			Log: map[string]any{"particles/temperature": []float32{float32(s), 2, 3, 4}}}))
	}
	assert.ErrorIs(t, hw.WriteFrame(&HOOMDFrame{Step: 300, Log: map[string]any{"new": []int32{1}}}), ErrSchema)
	require.NoError(t, hw.Close())
	sameAsPython(t, py, name)
	r, err := Open(sec2, name)
	require.NoError(t, err)
	types, err := HOOMDTypes(r, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{"A", "cell"}, types)
	require.NoError(t, r.Close())
	out, err := runPy(t, py, "-W", "ignore", "-c", `import sys,gsd.hoomd
t=gsd.hoomd.open(sys.argv[1],'rb');print('frames',len(t))
for fr in t:
  print(fr.configuration.step,fr.configuration.dimensions,list(fr.configuration.box),fr.particles.N,fr.particles.types,fr.particles.typeid.tolist(),fr.particles.position.dtype,fr.particles.position[3].tolist(),fr.log['particles/temperature'].tolist(),fr.log['energy'].tolist())`, name)
	require.NoError(t, err, out)
	assert.Equal(t, `frames 3
0 2 [10.0, 10.0, 0.0, 0.0, 0.0, 0.0] 4 ['A', 'cell'] [0, 1, 1, 0] float32 [9.0, 10.0, 11.0] [1.0, 2.0, 3.0, 4.0] [-1.5]
100 2 [10.0, 10.0, 0.0, 0.0, 0.0, 0.0] 4 ['A', 'cell'] [0, 1, 1, 0] float32 [9.0, 10.0, 11.0] [1.0, 2.0, 3.0, 4.0] [-1.5]
200 2 [10.0, 10.0, 0.0, 0.0, 0.0, 0.0] 4 ['A', 'cell'] [0, 1, 1, 0] float32 [9.0, 10.0, 11.0] [2.0, 2.0, 3.0, 4.0] [-1.5]
`, out)
}

// childEnv makes the test binary act as a writer that runs until killed.
const childEnv = "FTIGO_GSD_KILL_CHILD"

// TestKilledWriterChild is the child of TestInteropSIGKILL; on its own it
// does nothing.
func TestKilledWriterChild(t *testing.T) {
	name := os.Getenv(childEnv)
	if name == "" {
		return
	}
	w, err := Create(vfd.Sec2{}, name, "killed", "test", MakeVersion(1, 0))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(3)
	}
	data := make([]float32, 30000)
	for f := 0; ; f++ {
		for i := range data {
			data[i] = float32(f)
		}
		if err := WriteChunk(w, "pos", data, 10000, 3); err != nil {
			os.Exit(3)
		}
		if f%7 == 0 {
			_ = WriteChunk(w, fmt.Sprintf("name/%d", f), []int32{int32(f)}, 1, 1)
		}
		if err := w.EndFrame(); err != nil {
			os.Exit(3)
		}
		fmt.Printf("committed %d\n", f+1)
	}
}

// TestInteropSIGKILL kills a real writer process with SIGKILL while it
// writes and checks that python3-gsd and our reader see every frame it
// reported committed, and that the file takes appends.
func TestInteropSIGKILL(t *testing.T) {
	t.Parallel()
	py := needGSD(t)
	name := filepath.Join(t.TempDir(), "sigkill.gsd")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledWriterChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+name)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	reported := 0
	deadline := time.Now().Add(20 * time.Second)
	for sc.Scan() && time.Now().Before(deadline) {
		if _, err := fmt.Sscanf(sc.Text(), "committed %d", &reported); err == nil && reported >= 20 {
			break
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.GreaterOrEqual(t, reported, 20, "child made progress")
	killed := name + ".killed"
	_, err = vfd.CopyFile(sec2, killed, sec2, name, 0)
	require.NoError(t, err)
	r, err := Open(sec2, name)
	require.NoError(t, err)
	nf := r.NFrames()
	assert.GreaterOrEqual(t, nf, uint64(reported))
	last, _, err := ReadChunk[float32](r, nf-1, "pos")
	require.NoError(t, err)
	assert.Equal(t, float32(nf-1), last[29999])
	require.NoError(t, r.Close())
	w, err := OpenAppend(sec2, name, WithSync(false))
	require.NoError(t, err)
	require.NoError(t, WriteChunk(w, "after", []uint8{1}, 1, 1))
	require.NoError(t, w.EndFrame())
	require.NoError(t, w.Close())
	results := pyCheck(t, py, killed, name)
	assert.Equal(t, nf, samePyFrames(t, results[killed], killed))
	assert.Equal(t, nf+1, samePyFrames(t, results[name], name))
}

func samePyFrames(t *testing.T, res pyResult, name string) uint64 {
	t.Helper()
	samePy(t, res, name)
	return res.FL.NFrames
}
