// Package lint holds ftigo's house-rule tests. It has no API: its tests
// read the module and fail when a rule is broken.
//
// The floor plan (layering_test.go, docs/architecture.md) is checked on
// the imports go list reports, with the default build tags and the MPI
// ones. Each package has a floor:
//
//  1. base: vfd, comm, internal/b3 (and the test helper internal/testutil);
//  2. formats: fileformat, gsd, dhdf/h5, dhdf, sion, dataset, h5ckpt;
//  3. internal/encode;
//  4. internal/partner;
//  5. internal/levels;
//  6. ckpt;
//  7. tools: cmd/ftigo, capi, examples.
//
// A package imports only lower floors. Only formats import each other,
// without a cycle. A format imports comm only when it writes collectively
// (sion, dhdf, h5ckpt). Only test files import internal/testutil. An
// example imports only public packages. Test files follow the same rules.
// A package missing from the plan fails the test.
//
// The file rule (lint_test.go): no package outside vfd/ touches
// operating-system files through os, syscall or golang.org/x/sys/unix.
// cmd/, examples/ and internal/testutil are exempt, and so are test
// files. All other file I/O goes through a vfd.Driver, so every code path
// is crash-testable.
//
// Lifecycle: run with `go test ./internal/lint`. Concurrency: none.
//
// API stability: none: lint holds tests.
package lint
