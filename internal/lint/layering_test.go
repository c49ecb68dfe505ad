package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/ftigo/ftigo"

// The floors of the plan, bottom up (docs/architecture.md). A package
// imports packages of lower floors. Only the formats floor allows
// imports between its components, and those must not form a cycle.
const (
	floorBase = iota + 1
	floorFormats
	floorEncode
	floorPartner
	floorLevels
	floorCkpt
	floorTools
)

var floorNames = map[int]string{
	floorBase: "base", floorFormats: "formats", floorEncode: "encode", floorPartner: "partner",
	floorLevels: "levels", floorCkpt: "ckpt", floorTools: "tools",
}

// component is one unit of the plan: a package and the packages below
// it that are not components of their own.
type component struct {
	path  string // relative to the module root
	floor int
	// comm: a format that writes collectively may import comm.
	comm bool
	// testOnly: only test files may import it.
	testOnly bool
	// public: a user's module may import it; examples import only these.
	public bool
}

// plan is ftigo's floor plan.
var plan = []component{
	{path: "vfd", floor: floorBase, public: true},
	{path: "comm", floor: floorBase, public: true},
	{path: "internal/b3", floor: floorBase},
	{path: "internal/policy", floor: floorBase},
	{path: "internal/testutil", floor: floorBase, testOnly: true},

	{path: "fileformat", floor: floorFormats, public: true},
	{path: "gsd", floor: floorFormats, public: true},
	{path: "dhdf/h5", floor: floorFormats, public: true},
	{path: "dhdf", floor: floorFormats, comm: true, public: true},
	{path: "sion", floor: floorFormats, comm: true, public: true},
	{path: "dataset", floor: floorFormats, public: true},
	{path: "h5ckpt", floor: floorFormats, comm: true, public: true},

	{path: "internal/encode", floor: floorEncode},
	{path: "internal/exchange", floor: floorEncode},
	{path: "internal/partner", floor: floorPartner},
	{path: "internal/levels", floor: floorLevels},

	{path: "ckpt", floor: floorCkpt, public: true},

	{path: "cmd/ftigo", floor: floorTools},
	{path: "capi", floor: floorTools},
	{path: "examples", floor: floorTools},
	{path: "internal/lint", floor: floorTools},
	{path: "internal/doccheck", floor: floorTools},
}

// exceptions are imports the plan tolerates for now, with the reason.
// An exception no longer used is logged, not failed, so that the change
// that removes the import need not touch this file.
var exceptions = map[[2]string]string{}

// pkg is one package of the module as go list shows it: its path and
// its imports of the module's packages, relative to the module root.
type pkg struct {
	Path  string
	Deps  []string // imports of the package's non-test files
	Tests []string // imports of its test files, internal and external
}

// find returns the component holding path: the longest plan path that
// is path or a directory above it.
func find(path string) (component, bool) {
	var best component
	found := false
	for _, c := range plan {
		if (path == c.path || strings.HasPrefix(path, c.path+"/")) && len(c.path) > len(best.path) {
			best, found = c, true
		}
	}
	return best, found
}

// layering returns one message per broken rule of the plan in pkgs.
func layering(pkgs []pkg) []string {
	var msgs []string
	edges := map[[2]string]bool{} // component imports between different components
	used := map[[2]string]bool{}
	for _, p := range pkgs {
		from, ok := find(p.Path)
		if !ok {
			msgs = append(msgs, fmt.Sprintf("%s: not in the floor plan (add it to plan in internal/lint and to docs/architecture.md)", p.Path))
			continue
		}
		for _, kind := range []struct {
			imports []string
			test    bool
		}{{p.Deps, false}, {p.Tests, true}} {
			for _, imp := range kind.imports {
				to, ok := find(imp)
				if !ok {
					msgs = append(msgs, fmt.Sprintf("%s imports %s: not in the floor plan", p.Path, imp))
					continue
				}
				if to.path == from.path {
					continue
				}
				if reason := edgeRule(from, to, kind.test); reason != "" {
					if _, ok := exceptions[[2]string{p.Path, imp}]; ok {
						used[[2]string{p.Path, imp}] = true
					} else {
						what := "imports"
						if kind.test {
							what = "test imports"
						}
						msgs = append(msgs, fmt.Sprintf("%s %s %s: %s", p.Path, what, imp, reason))
					}
				}
				if !to.testOnly {
					edges[[2]string{from.path, to.path}] = true
				}
			}
		}
	}
	msgs = append(msgs, cycles(edges)...)
	for e, reason := range exceptions {
		if !used[e] && len(pkgs) > 0 {
			unusedException(e, reason)
		}
	}
	slices.Sort(msgs)
	return slices.Compact(msgs)
}

// unusedException is called for an exception no import needs; the real
// test logs it.
var unusedException = func([2]string, string) {}

// edgeRule returns why component from may not import component to, or "".
func edgeRule(from, to component, test bool) string {
	switch {
	case to.testOnly && !test:
		return "only test files import " + to.path
	case to.testOnly:
		return ""
	case to.floor > from.floor:
		return fmt.Sprintf("upward import (floor %s above %s)", floorNames[to.floor], floorNames[from.floor])
	case to.floor == from.floor && from.floor != floorFormats:
		return fmt.Sprintf("both on floor %s, whose packages do not import each other", floorNames[from.floor])
	case from.floor == floorFormats && to.path == "comm" && !from.comm:
		return "a format that does not write collectively does not import comm"
	case strings.HasPrefix(from.path, "examples") && !to.public:
		return "an example imports only what a user's module can (the public packages)"
	}
	return ""
}

// cycles returns one message per cycle among the component imports.
func cycles(edges map[[2]string]bool) []string {
	out := map[string][]string{}
	for e := range edges {
		out[e[0]] = append(out[e[0]], e[1])
	}
	for _, v := range out {
		slices.Sort(v)
	}
	nodes := make([]string, 0, len(out))
	for n := range out {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	var msgs []string
	state := map[string]int{} // 0 unseen, 1 on the stack, 2 done
	var stack []string
	var visit func(n string)
	visit = func(n string) {
		state[n] = 1
		stack = append(stack, n)
		for _, m := range out[n] {
			switch state[m] {
			case 0:
				visit(m)
			case 1:
				i := slices.Index(stack, m)
				cyc := append(slices.Clone(stack[i:]), m)
				msgs = append(msgs, "import cycle between components: "+strings.Join(cyc, " -> "))
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = 2
	}
	for _, n := range nodes {
		if state[n] == 0 {
			visit(n)
		}
	}
	return msgs
}

// listModule runs go list on the module's packages with the build tags
// and returns them with paths relative to the module root.
func listModule(t *testing.T, root, tags string) []pkg {
	t.Helper()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command (go test puts it on PATH)")
	cmd := exec.Command(goBin, "list", "-e", "-tags", tags, "-json=ImportPath,Imports,TestImports,XTestImports,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list -tags %q: %s", tags, stderr.String())
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
			Error                              *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		}
		require.NoError(t, err)
		require.Nil(t, p.Error, "go list -tags %q: %s", tags, p.ImportPath)
		pkgs = append(pkgs, pkg{Path: rel(p.ImportPath), Deps: rels(p.Imports), Tests: rels(append(p.TestImports, p.XTestImports...))})
	}
	return pkgs
}

func rel(path string) string {
	if path == modulePath {
		return "."
	}
	if r, ok := strings.CutPrefix(path, modulePath+"/"); ok {
		return r
	}
	return path
}

// rels returns the module's paths among paths, relative to its root.
func rels(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == modulePath || strings.HasPrefix(p, modulePath+"/") {
			out = append(out, rel(p))
		}
	}
	return out
}

// TestLayering checks the floor plan on the module's import graph, with
// the default build tags and with the MPI ones (Open MPI and MPICH).
func TestLayering(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root := moduleRoot(t)
	unusedException = func(e [2]string, reason string) {
		t.Logf("exception %s -> %s is no longer needed (%s): remove it from internal/lint", e[0], e[1], reason)
	}
	defer func() { unusedException = func([2]string, string) {} }()
	for _, tags := range []string{"", "mpi", "mpi mpich"} {
		pkgs := listModule(t, root, tags)
		require.NotEmpty(t, pkgs)
		paths := make([]string, len(pkgs))
		for i, p := range pkgs {
			paths[i] = p.Path
		}
		// The rule must see the packages it is about.
		for _, want := range []string{"vfd", "comm", "fileformat", "internal/levels", "ckpt", "cmd/ftigo"} {
			require.Contains(t, paths, want, "go list -tags %q", tags)
		}
		msgs := layering(pkgs)
		assert.Empty(t, msgs, "the floor plan (docs/architecture.md) is broken with tags %q:\n%s", tags, strings.Join(msgs, "\n"))
	}
}

// TestLayeringFindsViolations runs the rules on small graphs, each
// breaking one rule (or none).
func TestLayeringFindsViolations(t *testing.T) {
	tests := []struct {
		name string
		pkgs []pkg
		want []string // the messages, in order
	}{
		{"clean", []pkg{
			{Path: "vfd"}, {Path: "vfd/vfdtest", Deps: []string{"vfd"}},
			{Path: "fileformat", Deps: []string{"vfd"}, Tests: []string{"internal/testutil", "vfd/vfdtest"}},
			{Path: "h5ckpt", Deps: []string{"comm", "dataset", "fileformat", "dhdf/h5", "internal/b3"}},
			{Path: "dataset", Deps: []string{"fileformat"}},
			{Path: "internal/levels", Deps: []string{"internal/partner", "internal/encode", "sion", "comm"}},
			{Path: "ckpt", Deps: []string{"internal/levels"}}, {Path: "ckpt/mpitest", Tests: []string{"ckpt", "comm/mpi"}},
			{Path: "cmd/ftigo", Deps: []string{"ckpt", "internal/partner"}},
			{Path: "examples/heat2d", Deps: []string{"ckpt", "gsd"}, Tests: []string{"internal/testutil", "comm/commtest"}},
		}, nil},
		{"upward import", []pkg{{Path: "fileformat", Deps: []string{"internal/levels"}}},
			[]string{"fileformat imports internal/levels: upward import (floor levels above formats)"}},
		{"upward test import", []pkg{{Path: "internal/partner", Tests: []string{"ckpt"}}},
			[]string{"internal/partner test imports ckpt: upward import (floor ckpt above partner)"}},
		{"base peers", []pkg{{Path: "vfd/vfdtest", Deps: []string{"comm"}}},
			[]string{"vfd/vfdtest imports comm: both on floor base, whose packages do not import each other"}},
		{"tools peers", []pkg{{Path: "capi", Deps: []string{"cmd/ftigo"}}},
			[]string{"capi imports cmd/ftigo: both on floor tools, whose packages do not import each other"}},
		{"format not collective", []pkg{{Path: "gsd", Deps: []string{"vfd", "comm"}}},
			[]string{"gsd imports comm: a format that does not write collectively does not import comm"}},
		{"test helper in non-test code", []pkg{{Path: "sion", Deps: []string{"internal/testutil"}}},
			[]string{"sion imports internal/testutil: only test files import internal/testutil"}},
		{"example on machinery", []pkg{{Path: "examples/other", Deps: []string{"internal/partner"}}},
			[]string{"examples/other imports internal/partner: an example imports only what a user's module can (the public packages)"}},
		{"heat2d on machinery", []pkg{{Path: "examples/heat2d", Deps: []string{"internal/levels"}}},
			[]string{"examples/heat2d imports internal/levels: an example imports only what a user's module can (the public packages)"}},
		{"unknown package", []pkg{{Path: "newpkg", Deps: []string{"vfd"}}, {Path: "ckpt", Deps: []string{"other/x"}}},
			[]string{"ckpt imports other/x: not in the floor plan",
				"newpkg: not in the floor plan (add it to plan in internal/lint and to docs/architecture.md)"}},
		{"cycle among formats", []pkg{
			{Path: "dataset", Deps: []string{"fileformat"}},
			{Path: "fileformat", Deps: []string{"h5ckpt"}},
			{Path: "h5ckpt", Deps: []string{"dataset"}},
		}, []string{"import cycle between components: dataset -> fileformat -> h5ckpt -> dataset"}},
		{"cycle through a test", []pkg{
			{Path: "dataset", Deps: []string{"fileformat"}},
			{Path: "fileformat", Tests: []string{"dataset"}},
		}, []string{"import cycle between components: dataset -> fileformat -> dataset"}},
		{"subpackages are their component", []pkg{{Path: "dhdf/h5/x", Deps: []string{"dhdf"}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, layering(tt.pkgs))
		})
	}
}

func TestFind(t *testing.T) {
	for path, want := range map[string]string{
		"vfd": "vfd", "vfd/vfdtest": "vfd", "comm/mpi": "comm", "dhdf": "dhdf", "dhdf/h5": "dhdf/h5",
		"h5ckpt/mpitest": "h5ckpt", "ckpt/mpitest": "ckpt", "examples/heat2d/chaos": "examples",
		"internal/levels": "internal/levels", "internal/levelsx": "", "vfdx": "", "cmd/other": "",
	} {
		c, ok := find(path)
		assert.Equal(t, want != "", ok, path)
		assert.Equal(t, want, c.path, path)
	}
}
