package doccheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pkgDoc is the package doc comment of one file.
type pkgDoc struct {
	file string // relative to the module root
	pkg  string // import path of the file's package
	text string
}

// packageDocs returns every package doc comment of the module's non-test
// files.
func packageDocs(t *testing.T, root string) []pkgDoc {
	t.Helper()
	var out []pkgDoc
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil || f.Doc == nil {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		out = append(out, pkgDoc{file: rel, pkg: modulePath + "/" + filepath.ToSlash(filepath.Dir(rel)), text: f.Doc.Text()})
		return nil
	})
	require.NoError(t, err)
	return out
}

// api is the type information of the module's packages (and of the
// standard packages they import), from their export data.
type api struct {
	byPath map[string]*types.Package
	byName map[string]string // package name -> import path, module packages with a unique name
}

// loadAPI type-loads every package of the module.
func loadAPI(t *testing.T, root string) *api {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-f", "{{.Name}} {{.ImportPath}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var paths []string
	names := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		name, p, _ := strings.Cut(l, " ")
		paths = append(paths, p)
		if name != "main" {
			names[name] = append(names[name], p)
		}
	}
	exports := exportData(t, root, paths)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(p string) (io.ReadCloser, error) {
		if e := exports[p]; e != "" {
			return os.Open(e)
		}
		return nil, fmt.Errorf("no export data for %s", p)
	}).(types.ImporterFrom)
	a := &api{byPath: map[string]*types.Package{}, byName: map[string]string{}}
	for p, e := range exports {
		if e == "" {
			continue
		}
		pkg, err := imp.ImportFrom(p, root, 0)
		require.NoError(t, err, "import %s", p)
		a.byPath[p] = pkg
	}
	for name, ps := range names {
		if len(ps) == 1 {
			a.byName[name] = ps[0]
		}
	}
	return a
}

// resolve reports whether name (Name or Name.Member) exists in pkg:
// a package member, or a field or method of a package type.
func resolve(pkg *types.Package, name string) bool {
	first, member, _ := strings.Cut(name, ".")
	obj := pkg.Scope().Lookup(first)
	if obj == nil {
		return false
	}
	if member == "" {
		return true
	}
	tn, ok := obj.(*types.TypeName)
	if !ok {
		return false
	}
	found, _, _ := types.LookupFieldOrMethod(tn.Type(), true, pkg, member)
	return found != nil
}

// docLinkRE is a Go doc link: [Name], [Name.Member], [pkg.Name],
// [pkg.Name.Member], each with an optional *, or [import/path].
var docLinkRE = regexp.MustCompile(`\[\*?((?:[a-z][a-z0-9]*\.)?[A-Z][A-Za-z0-9_]*(?:\.[A-Z][A-Za-z0-9_]*)?|[a-z0-9.]+(?:/[a-z0-9_.]+)+)\]`)

// checkDocLink returns why link, a doc link of package from, does not
// resolve, or "" (also for a package the module does not know).
func (a *api) checkDocLink(from, link string) string {
	if strings.Contains(link, "/") {
		if _, ok := a.byPath[link]; !ok && strings.HasPrefix(link, modulePath) {
			return "no such package"
		}
		return ""
	}
	pkg := a.byPath[from]
	first, rest, _ := strings.Cut(link, ".")
	if first != "" && first[0] >= 'a' && first[0] <= 'z' {
		// pkg.Name: a package of the module or of the standard library.
		p := a.byName[first]
		if p == "" {
			p = first
		}
		if pkg = a.byPath[p]; pkg == nil {
			return ""
		}
		link = rest
	}
	if pkg == nil {
		return ""
	}
	if !resolve(pkg, link) {
		return "not in package " + pkg.Path()
	}
	return ""
}

func TestDocLinkRE(t *testing.T) {
	text := "See [Engine.Checkpoint], [*CorruptionError], [vfd.File], [comm.Mux], [github.com/ftigo/ftigo/dhdf/h5], [section], [32], [:n], [i] and [basic]."
	var got []string
	for _, m := range docLinkRE.FindAllStringSubmatch(text, -1) {
		got = append(got, m[1])
	}
	assert.Equal(t, []string{"Engine.Checkpoint", "CorruptionError", "vfd.File", "comm.Mux", "github.com/ftigo/ftigo/dhdf/h5"}, got)
}

// TestAPINames checks that the doc links of every package doc comment
// and the API names in code spans of README.md and docs/ (history pages
// aside) name members that exist: a renamed or removed name fails here.
func TestAPINames(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list -export")
	}
	root := repoRoot(t)
	a := loadAPI(t, root)
	require.Contains(t, a.byName, "ckpt")
	require.Contains(t, a.byName, "levels")

	// The checks can fail: a name that does not exist is reported.
	ck := a.byName["ckpt"]
	assert.Empty(t, a.checkDocLink(ck, "Runtime.Checkpoint"))
	assert.Empty(t, a.checkDocLink(ck, "vfd.File"))
	assert.Empty(t, a.checkDocLink(ck, "io.Reader"))
	assert.NotEmpty(t, a.checkDocLink(ck, "Runtime.NoSuchMethod"))
	assert.NotEmpty(t, a.checkDocLink(ck, "NoSuchName"))
	assert.NotEmpty(t, a.checkDocLink(ck, "vfd.NoSuchDriver"))
	assert.NotEmpty(t, a.checkDocLink(ck, modulePath+"/nosuchpkg"))
	assert.False(t, resolve(a.byPath[ck], "Config.NoSuchField"))
	assert.True(t, resolve(a.byPath[ck], "Config.CkptDir"))

	var problems []string
	links := 0
	for _, d := range packageDocs(t, root) {
		for _, m := range docLinkRE.FindAllStringSubmatch(d.text, -1) {
			links++
			if why := a.checkDocLink(d.pkg, m[1]); why != "" {
				problems = append(problems, fmt.Sprintf("%s: doc link [%s]: %s", d.file, m[1], why))
			}
		}
	}
	names := 0
	for _, f := range mdFiles(t, root) {
		if slices.Contains(history, f) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		for _, s := range mdSpans(string(b), symRE) {
			m := symRE.FindStringSubmatch(s.text)
			p, ok := a.byName[m[1]]
			if !ok {
				continue // not a package of the module (os.Rename, rt.Comm())
			}
			name := m[2]
			if isTestName(name) || (m[3] != "" && !ast.IsExported(m[3])) {
				continue // tests and unexported fields are no API
			}
			if m[3] != "" {
				name += "." + m[3]
			}
			names++
			if !resolve(a.byPath[p], name) {
				problems = append(problems, fmt.Sprintf("%s:%d: `%s`: not in package %s", f, s.line, s.text, p))
			}
		}
	}
	t.Logf("%d doc links, %d API names in Markdown", links, names)
	require.NotZero(t, links)
	require.NotZero(t, names)
	slices.Sort(problems)
	assert.Empty(t, problems, "names that do not exist:\n%s", strings.Join(problems, "\n"))
}

func isTestName(name string) bool {
	for _, p := range []string{"Test", "Benchmark", "Fuzz", "Example"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
