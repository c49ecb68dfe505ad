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
