package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBenchJSON(t *testing.T) {
	code, out, errs := ftigo("bench", "--size", "256KiB", "--repeats", "1", "--ranks", "4", "--dir", t.TempDir(), "--cold=false", "--json")
	require.Equal(t, 0, code, errs)
	var res benchResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Rows, 8, "a checkpoint and a restart row per level")
	wantCases := []string{"L1 checkpoint", "L1 restart", "L2 checkpoint", "L2 restart, node 1 lost",
		"L3 checkpoint", "L3 restart, nodes 1,2 lost", "L4 checkpoint", "L4 restart"}
	for i, row := range res.Rows {
		assert.Equal(t, wantCases[i], row.Case)
		assert.Equal(t, int64(256<<10), row.BytesRank)
		assert.Greater(t, row.Time.Median, 0.0, row.Case)
		assert.Greater(t, row.Raw.Median, 0.0, row.Case)
		assert.InDelta(t, row.Time.Median/row.Raw.Median, row.Ratio, 1e-9, row.Case)
	}
	assert.Equal(t, int64(4*256<<10), res.Rows[0].Persisted, "L1 persists the data once")
	assert.Equal(t, int64(2*4*256<<10), res.Rows[4].Persisted, "L3 persists data plus parity")
	assert.Equal(t, int64(4*256<<10), res.Rows[6].Persisted, "L4 writes the data once, into the container")
	assert.Greater(t, res.Blake3MBps, 0.0)
	assert.Greater(t, res.RSEncMBps, 0.0)
	assert.Greater(t, res.RSDecMBps, 0.0)
	assert.NotContains(t, out, "null")
}

// TestBenchDCPJSON: --dcp-dirty measures, per level, a full and a
// differential checkpoint and reports the dCP share and the bytes written.
func TestBenchDCPJSON(t *testing.T) {
	code, out, errs := ftigo("bench", "--size", "1MiB", "--repeats", "1", "--ranks", "4", "--dir", t.TempDir(),
		"--dcp-dirty", "0.25", "--dcp-block-size", "4096", "--json")
	require.Equal(t, 0, code, errs)
	var res dcpBenchResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Rows, 4)
	for i, row := range res.Rows {
		assert.Equal(t, i+1, row.Level)
		assert.Equal(t, 0.25, row.Dirty)
		assert.InDelta(t, 0.25, row.DCPShare, 0.01, "64 of 256 blocks per rank")
		assert.Greater(t, row.Full.Median, 0.0)
		assert.Greater(t, row.DCP.Median, 0.0)
		assert.InDelta(t, row.DCP.Median/row.Full.Median, row.Ratio, 1e-9)
		assert.Greater(t, row.FullBytesWritten, int64(4<<20-1), "the full checkpoint writes the data")
		assert.Less(t, row.BytesWritten, row.FullBytesWritten/2, "the differential one a quarter of it and metadata")
		assert.Greater(t, row.BytesWritten, int64(4*(1<<20)/4))
	}
	assert.NotContains(t, out, "null")
	code, _, errs = ftigo("bench", "--dcp-dirty", "1.5")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "--dcp-dirty 1.5: a fraction of the dCP blocks, 0..1")
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"bench", "--size", "lots"}, `invalid argument "lots" for "--size" flag`},
		{[]string{"bench", "--size", "4"}, "--size 4: at least 8 bytes"},
		{[]string{"bench", "--levels", "1,7"}, `bad level "7"`},
		{[]string{"bench", "--ranks", "1", "--levels", "2"}, "L2 and L3 need at least 2 ranks"},
		{[]string{"bench", "--repeats", "0"}, "--ranks and --repeats must be at least 1"},
		{[]string{"bench", "--ranks", "many"}, `invalid argument "many" for "--ranks" flag`},
		{[]string{"bench", "-size", "1MiB"}, "long flags take two dashes: --size"},
		{[]string{"bench", "extra"}, `takes no arguments, got "extra"`},
	} {
		code, out, errs := ftigo(tc.args...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Empty(t, out, "%v", tc.args)
		assert.Contains(t, errs, tc.msg, "%v", tc.args)
		assert.Contains(t, errs, "Usage: ftigo bench [flags]", "%v", tc.args)
	}
}

// TestSizeFlagRoundTrips: the default --size shown in the help parses back.
func TestSizeFlagRoundTrips(t *testing.T) {
	for _, n := range []int64{8, 1000, 64 << 10, 256 << 20, 3 << 30} {
		s := sizeFlag(n)
		var back sizeFlag
		require.NoError(t, back.Set(s.String()), s.String())
		assert.Equal(t, s, back)
	}
	code, out, _ := ftigo("bench", "--help")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "(default 256MiB)")
}
