package levels

import (
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// fullOf returns m with every rank's file lists (Files) and node names,
// read from its parts: what a test that looks at every rank needs of an
// engine's view.
func fullOf(t testing.TB, m *Manifest) *Manifest {
	t.Helper()
	f, err := LoadFull(m)
	require.NoError(t, err)
	return f
}

// testPartRanks is the engines' Config.PartRanks in the tests: 0 (the
// default) unless FTIGO_TEST_PART_RANKS says otherwise, so that the whole
// suite can run with parts of one sector.
func testPartRanks() int {
	n, _ := strconv.Atoi(os.Getenv("FTIGO_TEST_PART_RANKS"))
	return n
}
