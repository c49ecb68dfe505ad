package lint

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forbidden lists, per import path, the functions that touch files.
var forbidden = map[string][]string{
	"os": {"Open", "OpenFile", "OpenRoot", "OpenInRoot", "Create", "CreateTemp", "Remove", "RemoveAll", "Rename",
		"WriteFile", "ReadFile", "Mkdir", "MkdirAll", "MkdirTemp", "ReadDir", "Truncate", "Stat", "Lstat",
		"Link", "Symlink", "Chtimes", "Chmod", "DirFS", "CopyFS"},
	"syscall":               sysFileCalls,
	"golang.org/x/sys/unix": sysFileCalls,
}

var sysFileCalls = []string{"Open", "Openat", "Openat2", "Creat", "Unlink", "Unlinkat", "Rename", "Renameat",
	"Renameat2", "Mkdir", "Mkdirat", "Rmdir", "Truncate", "Ftruncate", "Pread", "Pwrite", "Preadv", "Pwritev",
	"Fsync", "Fdatasync", "SyncFileRange", "Fallocate", "Stat", "Lstat", "Fstatat", "Link", "Linkat", "Symlink",
	"Symlinkat", "Getdents", "ReadDirent"}

// exempt reports whether a slash-separated path relative to the module
// root may touch files directly.
func exempt(rel string) bool {
	for _, dir := range []string{"vfd/", "cmd/", "examples/", "internal/testutil/"} {
		if strings.HasPrefix(rel, dir) {
			return true
		}
	}
	return false
}

// check returns one "file:line: ..." message per forbidden call in f.
func check(fset *token.FileSet, f *ast.File) []string {
	local := map[string]string{} // local import name -> import path
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		if _, ok := forbidden[p]; !ok {
			continue
		}
		name := p[strings.LastIndex(p, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		if name == "_" || name == "." {
			if name == "." {
				local["."] = p
			}
			continue
		}
		local[name] = p
	}
	if len(local) == 0 {
		return nil
	}
	var msgs []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			id, ok := x.X.(*ast.Ident)
			if !ok {
				return true
			}
			p, ok := local[id.Name]
			if !ok || id.Obj != nil { // id.Obj != nil: a local variable shadows the package
				return true
			}
			if slices.Contains(forbidden[p], x.Sel.Name) {
				msgs = append(msgs, fmt.Sprintf("%s: %s.%s: direct file access outside vfd; use a vfd.Driver", fset.Position(x.Pos()), id.Name, x.Sel.Name))
			}
		case *ast.CallExpr:
			if id, ok := x.Fun.(*ast.Ident); ok && id.Obj == nil {
				if p, ok := local["."]; ok && slices.Contains(forbidden[p], id.Name) {
					msgs = append(msgs, fmt.Sprintf("%s: %s (dot-imported from %s): direct file access outside vfd; use a vfd.Driver", fset.Position(x.Pos()), id.Name, p))
				}
			}
		}
		return true
	})
	return msgs
}

func moduleRoot(t *testing.T) string {
	dir, err := filepath.Abs(".")
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "go.mod not found above the test directory")
		dir = parent
	}
}

// TestNoDirectFileAccess parses every non-test Go file of the module and
// fails on direct file access outside vfd/, cmd/, examples/ and
// internal/testutil/.
func TestNoDirectFileAccess(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var msgs []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if exempt(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution|parser.ImportsOnly)
		if err != nil {
			// A file being written by someone else may not parse yet; the
			// compiler reports that, not this rule.
			t.Logf("skipping %s: %v", rel, err)
			return nil
		}
		if !importsForbidden(f) {
			return nil
		}
		f, err = parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Logf("skipping %s: %v", rel, err)
			return nil
		}
		files++
		for _, m := range check(fset, f) {
			msgs = append(msgs, strings.TrimPrefix(m, root+string(filepath.Separator)))
		}
		return nil
	})
	require.NoError(t, err)
	t.Logf("checked %d files importing os, syscall or x/sys/unix", files)
	assert.Empty(t, msgs, "direct file access outside vfd:\n%s", strings.Join(msgs, "\n"))
}

func importsForbidden(f *ast.File) bool {
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err == nil {
			if _, ok := forbidden[p]; ok {
				return true
			}
		}
	}
	return false
}

func TestCheckFindsViolations(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"os calls", `package p
import "os"
func f() { os.Create("x"); _ = os.Getenv("HOME"); os.Remove("x") }`,
			[]string{"p.go:3:12: os.Create", "p.go:3:51: os.Remove"}},
		{"renamed import", `package p
import stdos "os"
func f() { _, _ = stdos.ReadFile("x") }`,
			[]string{"p.go:3:19: stdos.ReadFile"}},
		{"unix and syscall", `package p
import ("syscall"; "golang.org/x/sys/unix")
func f() { unix.Fsync(1); syscall.Unlink("x"); _ = unix.Getpid() }`,
			[]string{"p.go:3:12: unix.Fsync", "p.go:3:27: syscall.Unlink"}},
		{"method value", `package p
import "os"
var g = os.MkdirAll`,
			[]string{"p.go:3:9: os.MkdirAll"}},
		{"stdout is fine", `package p
import "os"
func f() { os.Stdout.WriteString("hi"); os.Exit(1) }`, nil},
		{"shadowing variable", `package p
import "os"
func f() { os := struct{ Create func() }{}; os.Create() }`, nil},
		{"dot import", `package p
import . "os"
func f() { Rename("a", "b") }`,
			[]string{"p.go:3:12: Rename (dot-imported from os)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", tt.src, 0)
			require.NoError(t, err)
			got := check(fset, f)
			require.Len(t, got, len(tt.want), "%q", got)
			for i, w := range tt.want {
				assert.True(t, strings.HasPrefix(got[i], w), "got %q, want prefix %q", got[i], w)
			}
		})
	}
}

func TestExempt(t *testing.T) {
	for rel, want := range map[string]bool{
		"vfd/sec2.go": true, "vfd/vfdtest/vfdtest.go": true, "cmd/ftigo/main.go": true,
		"examples/heat2d/main.go": true, "internal/testutil/tool.go": true,
		"levels/l1.go": false, "gsd/writer.go": false, "vfdx/a.go": false, "internal/lint/doc.go": false,
	} {
		assert.Equal(t, want, exempt(rel), rel)
	}
}
