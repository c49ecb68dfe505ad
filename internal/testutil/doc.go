// Package testutil holds helpers shared by ftigo's tests: the "needs an
// external tool" rule (skip locally when the tool is missing, fail when
// FTIGO_REQUIRE_TOOLS=1 as in CI) and small data generators.
//
// The helpers take a [TB], the part of testing.TB they call, so that
// their own tests can watch the rule with a recorder. It is imported only
// from _test.go files.
//
// API stability: internal to ftigo's tests; no API.
package testutil
