// Package doccheck holds the tests that keep ftigo's documentation true.
// It has no API.
//
// Go code in Markdown (README.md and docs/): a ```go block that starts
// with its package clause is a complete file. The test writes each into
// its own package of a temporary module that requires
// github.com/ftigo/ftigo, as a user's module would. It checks that the
// block is gofmt-formatted, runs go vet and go build, and runs every
// package main block, which must exit 0. Every README block is such a
// file. A docs/ block without a package clause is a sketch (below).
//
// Go code in package docs: the code blocks of a package doc comment are
// call-order sketches with placeholders (...) and free variables. The
// test parses each as statements and type-checks it against the packages
// it names. It fails on drift: a member, field or method that does not
// exist, or a wrong number of arguments or results. Blocks that are
// shell commands or tables are recognised by their first word and
// skipped.
//
// Names and links: every doc link of a package doc comment (a name in
// square brackets) must resolve. So must every API name in a code span
// of README.md and docs/ (`ckpt.Runtime.Checkpoint`). Every relative
// link of those pages must lead to a file and heading that exist, and
// every repository path in a code span must exist. Package docs must
// name only docs/ pages that exist. History pages (the performance
// archive, robustness.md) keep their past names: only their links are
// checked.
//
// The lifecycle example with its output is ckpt's Example, run by
// go test ./ckpt.
//
// API stability: none, this package has no API.
package doccheck
