// Package vfdtest is a conformance suite for [vfd.Driver] implementations,
// in the manner of testing/fstest: every driver in ftigo runs
// [TestDriver] from its tests.
//
// Lifecycle: a driver's test calls TestDriver with a function that
// returns a fresh driver and an existing, empty directory in it; the suite
// runs one subtest per property, each on a fresh driver.
//
// Concurrency: the subtests run sequentially; one of them runs ReadAt,
// WriteAt and [vfd.StartWriteback] concurrently on disjoint ranges of one
// file, so run the suite under -race.
//
// # API stability
//
// vfdtest is the conformance suite of vfd drivers: its entry points are
// kept stable as vfd's are, and it may gain tests. Before 1.0 an
// incompatible change is still possible.
package vfdtest
