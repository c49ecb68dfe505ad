// Package doccheck holds the tests that keep ftigo's documentation code
// true. It has no API.
//
// README.md: every ```go block is a complete Go file (it starts with its
// package clause). The test writes each into its own package of a
// temporary module that requires github.com/ftigo/ftigo with a replace
// directive to this checkout, as a user's module would, checks that the
// block is gofmt-formatted, runs go vet and go build on the module, and
// runs every package main block, which must exit 0. A block that drifts
// from the API fails go test.
//
// Package documentation: the Go code blocks of every package doc comment
// are call-order sketches with placeholders (...) and free variables, not
// programs. The test parses each one as statements, type-checks it against
// the packages it names and fails on what would be drift: a package
// member, field or method that does not exist, a wrong number of
// arguments or results. Free variables and unused results are allowed.
// Blocks that are not Go (shell commands, tables) are recognised by their
// first word and skipped.
//
// The lifecycle example with its output (a fresh run, a kill, a restart
// that is bit-identical) is ckpt's Example, run by go test ./ckpt.
//
// API stability: none, this package has no API.
package doccheck
