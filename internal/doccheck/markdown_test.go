package doccheck

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mdFiles returns README.md and every Markdown file under docs/,
// relative to the module root.
func mdFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// history are the pages that record past measurements and runs: their
// links are checked, not the paths and API names they mention.
var history = []string{"docs/performance-archive.md", "docs/robustness.md"}

// prose returns md without its fenced code blocks, each line kept (a
// fenced line becomes empty) so that line numbers stay right.
func prose(md string) []string {
	lines := strings.Split(md, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

var (
	linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	spanRE = regexp.MustCompile("`([^`]+)`")
	// pathRE: a span that is a path of the repository, such as
	// docs/format/ftiff.md, internal/levels or .ci/run.
	pathRE = regexp.MustCompile(`^\.?[A-Za-z0-9_-]+(/[A-Za-z0-9_.*-]+)+/?$`)
	// symRE: a span naming an API member, such as ckpt.Runtime.Checkpoint
	// or fileformat.Open().
	symRE = regexp.MustCompile(`^\*?([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z][A-Za-z0-9_]*))?(?:\(\))?$`)
)

// mdRef is a link, a path or an API name found in a Markdown file.
type mdRef struct {
	line int
	text string
}

// mdLinks returns the relative link targets of md (not URLs, not mail).
func mdLinks(md string) []mdRef {
	var out []mdRef
	for i, l := range prose(md) {
		l = spanRE.ReplaceAllString(l, "``")
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, mdRef{i + 1, target})
		}
	}
	return out
}

// mdSpans returns the inline code spans of md's prose matching re.
func mdSpans(md string, re *regexp.Regexp) []mdRef {
	var out []mdRef
	for i, l := range prose(md) {
		for _, m := range spanRE.FindAllStringSubmatch(l, -1) {
			if re.MatchString(m[1]) {
				out = append(out, mdRef{i + 1, m[1]})
			}
		}
	}
	return out
}

// anchors returns the anchors GitHub gives md's headings: lower case,
// punctuation dropped, spaces as hyphens, a repeated one numbered.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(md) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func TestAnchors(t *testing.T) {
	md := "# Performance\n## Where ftigo stands (2026-12-02)\n```\n# not a heading\n```\n## L2 × 64 MiB: `ftigo bench`\n## Components\n## Components\n"
	assert.Equal(t, map[string]bool{"performance": true, "where-ftigo-stands-2026-12-02": true,
		"l2--64-mib-ftigo-bench": true, "components": true, "components-1": true}, anchors(md))
}

func TestMdRefs(t *testing.T) {
	md := "See [a](docs/a.md#x), [b](https://x.org) and `[c](no.md)`.\n```sh\n[d](e.md) `vfd/x`\n```\n`internal/levels`, `go test ./...`, `ckpt.Runtime.Checkpoint`, `levels.Env.tentative`, `rt.Comm()`\n"
	assert.Equal(t, []mdRef{{1, "docs/a.md#x"}}, mdLinks(md))
	assert.Equal(t, []mdRef{{5, "internal/levels"}}, mdSpans(md, pathRE))
	assert.Equal(t, []mdRef{{5, "ckpt.Runtime.Checkpoint"}, {5, "levels.Env.tentative"}, {5, "rt.Comm()"}}, mdSpans(md, symRE))
}

// exists reports whether the slash-separated path p (a glob when it
// holds a *) names something under dir.
func exists(dir, p string) bool {
	full := filepath.Join(dir, filepath.FromSlash(p))
	if strings.Contains(p, "*") {
		m, err := filepath.Glob(full)
		return err == nil && len(m) > 0
	}
	_, err := os.Stat(full)
	return err == nil
}

// linkProblems returns one message per broken link or path of the
// Markdown texts (by path relative to root), and the numbers of links
// and paths checked.
func linkProblems(root string, texts map[string]string) (problems []string, links, paths int) {
	for f, md := range texts {
		dir := path.Dir(f)
		for _, l := range mdLinks(md) {
			links++
			target, anchor, _ := strings.Cut(l.text, "#")
			file := f
			if target != "" {
				file = path.Clean(path.Join(dir, target))
				if !exists(root, file) {
					problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no such file", f, l.line, l.text))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			to, ok := texts[file]
			if !ok {
				continue // a heading of a file that is not Markdown
			}
			if !anchors(to)[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: %s has no such heading", f, l.line, l.text, file))
			}
		}
		if slices.Contains(history, f) {
			continue // its paths may be patterns of runs (phase5-4x256-N.json)
		}
		for _, p := range mdSpans(md, pathRE) {
			first := strings.Split(p.text, "/")[0]
			if !exists(root, first) && !exists(filepath.Join(root, dir), first) {
				continue // a path of a run (ckpt_dir/node0001), not of the repository
			}
			paths++
			if !exists(root, p.text) && !exists(filepath.Join(root, dir), p.text) {
				problems = append(problems, fmt.Sprintf("%s:%d: `%s`: no such file or directory", f, p.line, p.text))
			}
		}
	}
	slices.Sort(problems)
	return problems, links, paths
}

// TestMarkdownLinks checks that the links of README.md and docs/ lead to
// files and headings that exist, and that the repository paths they
// name in code spans exist (history pages aside).
func TestMarkdownLinks(t *testing.T) {
	root := repoRoot(t)
	texts := map[string]string{}
	for _, f := range mdFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		texts[f] = string(b)
	}
	problems, links, paths := linkProblems(root, texts)
	t.Logf("%d Markdown files, %d links, %d paths", len(texts), links, paths)
	require.NotZero(t, links)
	require.NotZero(t, paths)
	assert.Empty(t, problems, "broken links or paths:\n%s", strings.Join(problems, "\n"))
}

// TestLinkProblems: each kind of broken link or path is found.
func TestLinkProblems(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs", "format"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "format", "ftiff.md"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "a.md"), nil, 0o644))
	texts := map[string]string{
		"docs/a.md": "# A\n## Two words\n[ok](format/ftiff.md), [here](#two-words), [gone](b.md), [bad](#three)\n" +
			"`docs/format/ftiff.md`, `docs/format/nope.md`, `ckpt_dir/node0001`\n",
		"docs/format/ftiff.md": "# FTI-FF\n[up](../a.md#a), [no](../a.md#b)\n",
	}
	problems, links, paths := linkProblems(root, texts)
	assert.Equal(t, []string{
		"docs/a.md:3: link to #three: docs/a.md has no such heading",
		"docs/a.md:3: link to b.md: no such file",
		"docs/a.md:4: `docs/format/nope.md`: no such file or directory",
		"docs/format/ftiff.md:2: link to ../a.md#b: docs/a.md has no such heading",
	}, problems)
	assert.Equal(t, 6, links)
	assert.Equal(t, 2, paths)
}

// docPathRE: a path under docs/ named in a package doc comment.
var docPathRE = regexp.MustCompile(`\bdocs/[A-Za-z0-9_./-]*[A-Za-z0-9_]`)

// TestDocCommentPaths checks that the docs/ pages the package doc
// comments name exist.
func TestDocCommentPaths(t *testing.T) {
	root := repoRoot(t)
	docs := packageDocs(t, root)
	require.NotEmpty(t, docs)
	var problems []string
	n := 0
	for _, d := range docs {
		for _, p := range docPathRE.FindAllString(d.text, -1) {
			n++
			if !exists(root, p) {
				problems = append(problems, fmt.Sprintf("%s: names %s: no such file", d.file, p))
			}
		}
	}
	require.NotZero(t, n, "the package docs name pages of docs/")
	slices.Sort(problems)
	assert.Empty(t, problems, "%s", strings.Join(problems, "\n"))
}
