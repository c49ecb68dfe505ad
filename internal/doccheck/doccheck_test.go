package doccheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/format"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/ftigo/ftigo"

// repoRoot is the module root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "go.mod"))
	require.NoError(t, err, "module root")
	return root
}

// block is one fenced code block of a Markdown file.
type block struct {
	line int // 1-based line of the opening fence
	code string
}

// fencedBlocks returns the blocks of md whose fence names lang.
func fencedBlocks(md, lang string) []block {
	var out []block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```"+lang {
			continue
		}
		start := i
		var code []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			code = append(code, lines[i])
		}
		out = append(out, block{line: start + 1, code: strings.Join(code, "\n") + "\n"})
	}
	return out
}

func TestFencedBlocks(t *testing.T) {
	md := "text\n```go\npackage a\n```\n```sh\nls\n```\n\n```go\npackage b\n\nfunc F() {}\n```\n"
	got := fencedBlocks(md, "go")
	assert.Equal(t, []block{{2, "package a\n"}, {9, "package b\n\nfunc F() {}\n"}}, got)
	assert.Equal(t, []block{{5, "ls\n"}}, fencedBlocks(md, "sh"))
}

func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	require.NoError(t, err, "the go command (go test puts it on PATH)")
	return p
}

// goCmd runs the go command in dir and returns its combined output.
func goCmd(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(goTool(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mdGoBlocks returns the Go blocks of README.md and docs/: the complete
// files (a block starting with its package clause; every README block
// is one) and the sketches (statements, as in package docs).
func mdGoBlocks(t *testing.T, root string) (files []mdBlock, sketches []sketch) {
	t.Helper()
	for _, name := range mdFiles(t, root) {
		md, err := os.ReadFile(filepath.Join(root, name))
		require.NoError(t, err)
		for _, b := range fencedBlocks(string(md), "go") {
			where := fmt.Sprintf("%s:%d", name, b.line)
			f, err := parser.ParseFile(token.NewFileSet(), where, b.code, parser.PackageClauseOnly)
			if err != nil && name != "README.md" {
				sketches = append(sketches, sketch{where, b.code})
				continue
			}
			require.NoError(t, err, "%s: a Go block of the README is a complete file, starting with its package clause", where)
			files = append(files, mdBlock{where: where, block: b, main: f.Name.Name == "main"})
		}
	}
	return files, sketches
}

// mdBlock is a complete Go file of a Markdown page.
type mdBlock struct {
	where string // file:line
	block
	main bool
}

// TestMarkdownGoBlocks compiles, vets and runs the Go files of README.md
// and docs/ in a user's module.
func TestMarkdownGoBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module with the go command")
	}
	root := repoRoot(t)
	blocks, _ := mdGoBlocks(t, root)
	require.NotEmpty(t, blocks, "README.md has Go blocks")

	mod := t.TempDir()
	gomod := fmt.Sprintf("module example.com/readme\n\ngo 1.26\n\nrequire %s v0.0.0\n\nreplace %s => %s\n", modulePath, modulePath, root)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644))
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(mod, "go.sum"), sum, 0o644))

	var mains []string
	readmeMain := false
	for i, b := range blocks {
		formatted, err := format.Source([]byte(b.code))
		require.NoError(t, err, b.where)
		assert.Equal(t, string(formatted), b.code, "%s: not gofmt-formatted", b.where)
		dir := fmt.Sprintf("block%02d_%s_line%d", i, regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(strings.TrimSuffix(b.where[:strings.LastIndex(b.where, ":")], ".md"), "_"), b.line)
		require.NoError(t, os.MkdirAll(filepath.Join(mod, dir), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(mod, dir, "block.go"), []byte(b.code), 0o644))
		if b.main {
			mains = append(mains, dir)
			readmeMain = readmeMain || strings.HasPrefix(b.where, "README.md:")
		}
	}
	require.True(t, readmeMain, "README.md has a complete program")
	out, err := goCmd(t, mod, "vet", "./...")
	require.NoError(t, err, "go vet of the Markdown Go blocks (directory names give the file and line):\n%s", out)
	bin := filepath.Join(mod, "bin")
	out, err = goCmd(t, mod, "build", "-o", bin+string(filepath.Separator), "./...")
	require.NoError(t, err, "go build of the Markdown Go blocks:\n%s", out)
	for _, dir := range mains {
		// Each program runs in a directory of its own (it writes run/).
		work := t.TempDir()
		cmd := exec.Command(filepath.Join(bin, dir))
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "program %s:\n%s", dir, out)
		assert.NotEmpty(t, out, "program %s prints what it did", dir)
	}
}

// sketch is one Go code block of a package doc comment (or a Go block
// of docs/ that is not a complete file).
type sketch struct {
	file string // relative to the module root (with the line, for docs/)
	code string
}

// notGo are the first words of doc-comment code blocks that are shell
// commands, tables or log lines, not Go.
var notGo = []string{"go", "mpicc", "mpicxx", "mpifort", "pip", "capi/build.sh", "mpirun", "mpirun.openmpi", "mpirun.mpich", "ftigo", "function", "gobench", "Ckpt."}

// docSketches returns the code blocks of every package doc comment in the
// module, split into Go sketches and the rest.
func docSketches(t *testing.T, root string) (sketches []sketch, others []string) {
	t.Helper()
	for _, d := range packageDocs(t, root) {
		for _, code := range codeBlocks(d.text) {
			first := strings.Fields(code)[0]
			if slices.Contains(notGo, first) || regexp.MustCompile(`^[A-Z_]+=`).MatchString(first) {
				others = append(others, d.file+": "+first)
				continue
			}
			sketches = append(sketches, sketch{d.file, code})
		}
	}
	return sketches, others
}

// codeBlocks returns the indented blocks of a doc comment's text.
func codeBlocks(text string) []string {
	var out []string
	var cur []string
	flush := func() {
		for len(cur) > 0 && strings.TrimSpace(cur[len(cur)-1]) == "" {
			cur = cur[:len(cur)-1]
		}
		if len(cur) > 0 {
			out = append(out, dedent(cur))
		}
		cur = nil
	}
	prevBlank := true
	for _, l := range strings.Split(text, "\n") {
		indented := strings.HasPrefix(l, "\t") || strings.HasPrefix(l, " ")
		switch {
		case indented && (len(cur) > 0 || prevBlank):
			// A list item ("  - x", " 1. x") is not code.
			if len(cur) == 0 && regexp.MustCompile(`^\s+([-*+]|\d+\.)\s`).MatchString(l) {
				prevBlank = false
				continue
			}
			cur = append(cur, l)
		case strings.TrimSpace(l) == "" && len(cur) > 0:
			cur = append(cur, l)
		default:
			flush()
		}
		prevBlank = strings.TrimSpace(l) == ""
	}
	flush()
	return out
}

func dedent(lines []string) string {
	prefix := ""
	for _, c := range lines[0] {
		if c != ' ' && c != '\t' {
			break
		}
		prefix += string(c)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimPrefix(l, prefix))
		b.WriteByte('\n')
	}
	return b.String()
}

// placeholders are the sketches' "anything here" marks.
var placeholders = strings.NewReplacer("(...)", "(ARGS...)", "{ ... }", "{}")

// sketchSource wraps a sketch into a file that imports the module's
// packages it names: pkgs maps a package name to its import path.
func sketchSource(code string, pkgs map[string]string) (string, []string) {
	code = placeholders.Replace(code)
	var names []string
	for name := range pkgs {
		if regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\.`).MatchString(code) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString("package sketch\n\nimport (\n")
	for _, n := range names {
		fmt.Fprintf(&b, "\t%s %q\n", n, pkgs[n])
	}
	b.WriteString(")\n\nfunc _() {\n")
	b.WriteString(code)
	b.WriteString("}\n")
	return b.String(), names
}

// drift reports whether a type-checking error of a sketch means the API
// it shows is wrong, not merely that the sketch leaves something out.
func drift(msg string) bool {
	for _, ok := range []*regexp.Regexp{
		regexp.MustCompile(`^undefined: [A-Za-z_][A-Za-z0-9_]*$`), // a free variable
		regexp.MustCompile(`declared and not used`),
		regexp.MustCompile(`imported and not used`),
		regexp.MustCompile(`^no new variables on left side of :=$`),
		regexp.MustCompile(`^cannot use \.\.\. in call to non-variadic`), // f(...): any arguments
	} {
		if ok.MatchString(msg) {
			return false
		}
	}
	return true
}

// exportData maps the module's packages to their compiled export data
// (go list -export), for the type checker's importer.
func exportData(t *testing.T, root string, paths []string) map[string]string {
	t.Helper()
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Export"}, paths...)
	cmd := exec.Command(goTool(t), args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list -export: %s", stderr.String())
	m := map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		m[p.ImportPath] = p.Export
	}
	return m
}

// TestDocSketches type-checks the Go sketches of the package docs.
func TestDocSketches(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list -export")
	}
	root := repoRoot(t)
	sketches, others := docSketches(t, root)
	require.NotEmpty(t, sketches, "the package docs have Go sketches")
	t.Logf("not Go: %v", others)
	_, md := mdGoBlocks(t, root)
	sketches = append(sketches, md...)

	// Every importable package of the module, by name.
	cmd := exec.Command(goTool(t), "list", "-f", "{{.Name}} {{.ImportPath}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	require.NoError(t, err)
	pkgs := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, path, _ := strings.Cut(l, " ")
		// Internal packages too: their docs and docs/ show them.
		if name != "main" {
			pkgs[name] = path
		}
	}
	var need []string
	srcs := make([]string, len(sketches))
	for i, s := range sketches {
		var names []string
		srcs[i], names = sketchSource(s.code, pkgs)
		for _, n := range names {
			need = append(need, pkgs[n])
		}
	}
	slices.Sort(need)
	exports := exportData(t, root, slices.Compact(need))
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if e := exports[path]; e != "" {
			return os.Open(e)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	})
	for i, s := range sketches {
		t.Run(strings.ReplaceAll(s.file, "/", "_")+"_"+strconv.Itoa(i), func(t *testing.T) {
			f, err := parser.ParseFile(fset, s.file, srcs[i], 0)
			require.NoError(t, err, "%s: a Go sketch of the package doc does not parse:\n%s", s.file, srcs[i])
			var problems []string
			conf := types.Config{Importer: imp, Error: func(err error) {
				if te, ok := err.(types.Error); ok && !drift(te.Msg) {
					return
				}
				problems = append(problems, err.Error())
			}}
			_, _ = conf.Check("sketch", fset, []*ast.File{f}, nil)
			assert.Empty(t, problems, "%s: the package doc's sketch does not match the API:\n%s", s.file, s.code)
		})
	}
}

func TestDrift(t *testing.T) {
	for msg, want := range map[string]bool{
		"undefined: buf":        false,
		"undefined: dhdf.Creat": true,
		"w.Definesds undefined (type *dhdf.Writer has no field or method Definesds)": true,
		"not enough arguments in call to ckpt.LoadConfig":                            true,
		"declared and not used: lay":                                                 false,
		"cannot use ... in call to non-variadic g.SetAttr":                           false,
		"assignment mismatch: 2 variables but dhdf.Create returns 3 values":          true,
	} {
		assert.Equal(t, want, drift(msg), msg)
	}
}
