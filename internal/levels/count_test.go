package levels

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
)

// countComm wraps a communicator and counts what its rank receives: one
// message per peer's piece of data, as comm's counters count them. Its
// sub-communicators share the count.
type countComm struct {
	comm.Comm
	n *rankCount
}

// rankCount is one rank's received traffic.
type rankCount struct {
	msgs, bytes atomic.Int64
}

func (c countComm) recv(msgs, bytes int) {
	c.n.msgs.Add(int64(msgs))
	c.n.bytes.Add(int64(bytes))
}

func (c countComm) Bcast(root int, buf []byte) error {
	err := c.Comm.Bcast(root, buf)
	if c.Rank() != root {
		c.recv(1, len(buf))
	}
	return err
}

func (c countComm) Allgather(send, recv []byte) error {
	err := c.Comm.Allgather(send, recv)
	c.recv(c.Size()-1, len(recv)-len(send))
	return err
}

func (c countComm) AllreduceInt64(v int64, op comm.Op) (int64, error) {
	r, err := c.Comm.AllreduceInt64(v, op)
	c.recv(1, 8)
	return r, err
}

func (c countComm) Recv(src, tag int, buf []byte) (int, error) {
	n, err := c.Comm.Recv(src, tag, buf)
	c.recv(1, n)
	return n, err
}

func (c countComm) Sendrecv(send []byte, dst, sendTag int, recv []byte, src, recvTag int) (int, error) {
	n, err := c.Comm.Sendrecv(send, dst, sendTag, recv, src, recvTag)
	c.recv(1, n)
	return n, err
}

func (c countComm) Split(color, key int) (comm.Comm, error) {
	s, err := c.Comm.Split(color, key)
	if s == nil || err != nil {
		return s, err
	}
	return countComm{s, c.n}, nil
}

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
