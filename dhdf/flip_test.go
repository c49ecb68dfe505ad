package dhdf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/dhdf/h5"
	"github.com/ftigo/ftigo/internal/testutil"
	"github.com/ftigo/ftigo/vfd"
)

// flip is one single-bit change: byte Off of File, XORed with Mask.
type flip struct {
	File string
	Off  int
	Mask byte
}

func (f flip) MarshalJSON() ([]byte, error) { return json.Marshal([]any{f.File, f.Off, f.Mask}) }

// tinyFiles writes the tiny set into dir and returns its files' bytes.
func tinyFiles(t *testing.T, dir string) ([]string, map[string][]byte) {
	writeTinySet(t, vfd.Sec2{}, filepath.Join(dir, "tiny"))
	names := []string{"tiny.h5", "tiny.1.h5", "tiny.2.h5"}
	files := map[string][]byte{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		require.NoError(t, err)
		files[n] = b
	}
	return names, files
}

// verifyFlipped runs Verify on the set files with file changed replaced
// by b, read in memory.
func verifyFlipped(names []string, files map[string][]byte, changed string, b []byte) error {
	d := memFiles{}
	for _, n := range names {
		d[n] = files[n]
	}
	if changed != "" {
		d[changed] = b
	}
	return Verify("tiny.h5", Options{Driver: d})
}

// memFiles is a read-only vfd.Driver over byte slices, cheaper than a
// vfd.Core for the hundred thousand sets TestVerifyCoversEveryBit opens.
type memFiles map[string][]byte

func (m memFiles) Name() string { return "mem" }
func (m memFiles) Open(name string, flag vfd.Flag) (vfd.File, error) {
	b, ok := m[path.Clean(name)]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	if flag.Writable() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return memFile{bytes.NewReader(b), name, int64(len(b))}, nil
}
func (m memFiles) Remove(string) error                   { return fs.ErrPermission }
func (m memFiles) RemoveAll(string) error                { return fs.ErrPermission }
func (m memFiles) Rename(string, string) error           { return fs.ErrPermission }
func (m memFiles) Stat(string) (fs.FileInfo, error)      { return nil, fs.ErrPermission }
func (m memFiles) ReadDir(string) ([]fs.DirEntry, error) { return nil, fs.ErrPermission }
func (m memFiles) MkdirAll(string, fs.FileMode) error    { return fs.ErrPermission }
func (m memFiles) SyncDir(string) error                  { return nil }

type memFile struct {
	*bytes.Reader
	name string
	size int64
}

func (f memFile) WriteAt([]byte, int64) (int, error) { return 0, fs.ErrPermission }
func (f memFile) Close() error                       { return nil }
func (f memFile) Name() string                       { return f.name }
func (f memFile) Size() (int64, error)               { return f.size, nil }
func (f memFile) Truncate(int64) error               { return fs.ErrPermission }
func (f memFile) Sync() error                        { return nil }

// h5pyChanged runs testdata/h5py_flips.py over flips of the set in dir
// and returns, per flip h5py reads differently from the intact set, the
// first difference it found.
func h5pyChanged(t *testing.T, dir string, names []string, flips []flip) map[flip]string {
	t.Helper()
	py := testutil.NeedPython(t, "h5py", "numpy")
	list := filepath.Join(t.TempDir(), "flips.json")
	js, err := json.Marshal(flips)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(list, js, 0o644))
	script, err := filepath.Abs("testdata/h5py_flips.py")
	require.NoError(t, err)
	cmd := exec.Command(py, script, dir, "tiny.h5", list)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "h5py_flips.py: %s", stderr.String())
	var res struct {
		Baseline map[string]any `json:"baseline"`
		Changed  [][]any        `json:"changed"`
	}
	require.NoError(t, json.Unmarshal(out, &res))
	for _, n := range names {
		_, isErr := res.Baseline[n].(string)
		require.False(t, isErr, "h5py cannot read the intact %s: %v", n, res.Baseline[n])
	}
	changed := map[flip]string{}
	for _, c := range res.Changed {
		changed[flip{c[0].(string), int(c[1].(float64)), byte(c[2].(float64))}] = c[3].(string)
	}
	return changed
}

// maxPythonFlips bounds the accepted flips given to h5py (about 40 ms
// each); more are sampled evenly.
const maxPythonFlips = 200

// TestVerifyCoversEveryBit flips every bit of every file of the tiny set
// (MHF and both AHFs), one at a time, and runs Verify on the result.
// Every flip Verify accepts is then given to h5py (testdata/h5py_flips.py),
// which must read exactly what it reads from the intact set: every group,
// link, attribute and dataset, with dtypes, shapes, fill values, virtual
// sources and raw bytes (evenly sampled down to maxPythonFlips if Verify
// accepts more). So no single-bit change a reader can see gets past
// Verify.
func TestVerifyCoversEveryBit(t *testing.T) {
	if testing.Short() {
		t.Skip("about 100 000 verifications; skipped with -short")
	}
	dir := t.TempDir()
	names, files := tinyFiles(t, dir)
	require.NoError(t, verifyFlipped(names, files, "", nil))
	start := time.Now()
	var all []flip
	for _, n := range names {
		for off := range files[n] {
			for bit := 0; bit < 8; bit++ {
				all = append(all, flip{n, off, 1 << bit})
			}
		}
	}
	ok := make([]bool, len(all))
	workers := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bufs := map[string][]byte{}
			for _, n := range names {
				bufs[n] = bytes.Clone(files[n])
			}
			for i := w; i < len(all); i += workers {
				fl := all[i]
				b := bufs[fl.File]
				b[fl.Off] ^= fl.Mask
				ok[i] = verifyFlipped(names, files, fl.File, b) == nil
				b[fl.Off] ^= fl.Mask
			}
		}()
	}
	wg.Wait()
	var accepted []flip
	for i, a := range ok {
		if a {
			accepted = append(accepted, all[i])
		}
	}
	t.Logf("%d single-bit flips in %v; Verify refused %d, accepted %d%s", len(all), time.Since(start).Round(time.Millisecond),
		len(all)-len(accepted), len(accepted), flipRanges(accepted))
	sample := accepted
	if len(sample) > maxPythonFlips {
		sample = nil
		for i := 0; i < maxPythonFlips; i++ {
			sample = append(sample, accepted[i*len(accepted)/maxPythonFlips])
		}
	}
	if len(sample) == 0 {
		return // nothing for h5py to compare (TestH5pySeesTableFlips shows it would see them)
	}
	changed := h5pyChanged(t, dir, names, sample)
	n := 0
	for _, fl := range sample {
		if d, ok := changed[fl]; ok {
			if n++; n <= 30 {
				t.Errorf("Verify accepted a flip h5py sees: %s byte %d mask %#02x: %s", fl.File, fl.Off, fl.Mask, d)
			}
		}
	}
	if n > 30 {
		t.Errorf("... %d such flips in all (of %d sampled)", n, len(sample))
	}
}

// TestH5pySeesTableFlips flips single bits in the places the issue named
// (a host name, bytes after a file name's and a chunk name's NUL, unused
// dimension and origin slots of a chunk table, an AHF's File_Info): h5py
// reads each as a changed value (so the dump of TestVerifyCoversEveryBit
// is sensitive to them) and Verify refuses each.
func TestH5pySeesTableFlips(t *testing.T) {
	dir := t.TempDir()
	names, files := tinyFiles(t, dir)
	addr := func(file, obj string) int {
		f, err := h5.Open(bytes.NewReader(files[file]), int64(len(files[file])), file)
		require.NoError(t, err)
		o, err := f.Lookup(obj)
		require.NoError(t, err)
		return int(o.DataAddr)
	}
	const fiRow, ctRow = 514, 515
	fi := addr("tiny.h5", "/File_Info")
	ct := addr("tiny.h5", "/DHDF_ChunkTables/t")
	ahf := addr("tiny.1.h5", "/File_Info")
	flips := map[string]flip{
		"MHF host name":                     {"tiny.h5", fi + fiRow + 259 + 2, 0x01},
		"MHF byte after a file name's NUL":  {"tiny.h5", fi + fiRow + 4 + len("tiny.1.h5") + 1, 0x40},
		"MHF last byte of a host field":     {"tiny.h5", fi + 2*fiRow + 259 + 254, 0x80},
		"chunk name padding":                {"tiny.h5", ct + 4 + len("t_1_0") + 3, 0x02},
		"unused DimSizes slot":              {"tiny.h5", ct + 4 + 255 + 4*5, 0x01},
		"unused Origins slot, second row":   {"tiny.h5", ct + ctRow + 4 + 255 + 128 + 4*31 + 3, 0x10},
		"AHF File_Info host of the MHF row": {"tiny.1.h5", ahf + 259, 0x20},
		"AHF File_Info own file name":       {"tiny.1.h5", ahf + fiRow + 4 + 5, 0x01},
	}
	var list []flip
	for what, fl := range flips {
		b := bytes.Clone(files[fl.File])
		b[fl.Off] ^= fl.Mask
		err := verifyFlipped(names, files, fl.File, b)
		assert.Error(t, err, "Verify accepted: %s", what)
		assert.Contains(t, fmt.Sprint(err), fl.File, what)
		list = append(list, fl)
	}
	changed := h5pyChanged(t, dir, names, list)
	for what, fl := range flips {
		assert.Contains(t, changed, fl, "h5py does not see: %s", what)
	}
}

// flipRanges summarises flips as byte ranges per file.
func flipRanges(fs []flip) string {
	var b strings.Builder
	for i := 0; i < len(fs); {
		j := i
		for j+1 < len(fs) && fs[j+1].File == fs[i].File && fs[j+1].Off <= fs[j].Off+1 {
			j++
		}
		if b.Len() > 2000 {
			fmt.Fprintf(&b, " ...")
			break
		}
		fmt.Fprintf(&b, " %s[%d..%d]", fs[i].File, fs[i].Off, fs[j].Off)
		i = j + 1
	}
	return b.String()
}
