// Package lint holds ftigo's house-rule tests. It has no API: its tests
// parse the module's source and fail when a rule is broken.
//
// Rule 1 (lint_test.go): no package outside vfd/ (and cmd/, examples/,
// and the test-only helper internal/testutil) touches operating-system
// files directly through os, syscall or golang.org/x/sys/unix; all file
// I/O goes through a vfd.Driver so every code path is crash-testable.
// Test files are exempt.
//
// Lifecycle: run with `go test ./internal/lint`. Concurrency: none.
//
// API stability: none: lint holds tests.
package lint
