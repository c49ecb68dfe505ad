package comm_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
)

func TestHelperErrors(t *testing.T) {
	tests := []struct {
		name string
		fn   func(c comm.Comm) error
		want error
	}{
		{"RecvChunked into a short buffer", func(c comm.Comm) error {
			if c.Rank() == 0 {
				return comm.SendChunked(c, 1, 0, make([]byte, 100), 10)
			}
			_, err := comm.RecvChunked(c, 0, 0, make([]byte, 99), 10)
			assert.ErrorContains(t, err, "100-byte chunked transfer from rank 0 into a 99-byte buffer")
			return err
		}, comm.ErrTruncated},
		{"RecvChunked with a different block size", func(c comm.Comm) error {
			if c.Rank() == 0 {
				return comm.SendChunked(c, 1, 0, make([]byte, 100), 10)
			}
			_, err := comm.RecvChunked(c, 0, 0, make([]byte, 100), 20)
			assert.ErrorContains(t, err, "short block of 10 bytes from rank 0, want 20")
			return err
		}, comm.ErrBadArgument},
		{"RecvChunked with a smaller block size", func(c comm.Comm) error {
			if c.Rank() == 0 {
				return comm.SendChunked(c, 1, 0, make([]byte, 100), 20)
			}
			_, err := comm.RecvChunked(c, 0, 0, make([]byte, 100), 10)
			return err
		}, comm.ErrTruncated},
		{"BcastBytes from a bad root", func(c comm.Comm) error {
			_, err := comm.BcastBytes(c, 5, []byte("x"))
			return err
		}, comm.ErrBadArgument},
		{"SendChunked to a bad rank", func(c comm.Comm) error {
			return comm.SendChunked(c, -1, 0, nil, 0)
		}, comm.ErrBadArgument},
		{"RecvChunked from a bad rank", func(c comm.Comm) error {
			_, err := comm.RecvChunked(c, 9, 0, nil, 0)
			return err
		}, comm.ErrBadArgument},
		{"SendrecvChunked with a bad rank", func(c comm.Comm) error {
			_, err := comm.SendrecvChunked(c, nil, 2, nil, 0, 0, 0)
			return err
		}, comm.ErrBadArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := comm.Run(2, tc.fn, comm.WithTimeout(5*time.Second))
			assert.ErrorIs(t, err, tc.want)
			assert.NotErrorIs(t, err, comm.ErrTimeout)
		})
	}
}

func TestChunkedSizes(t *testing.T) {
	for _, tc := range []struct{ n, chunk int }{{0, 0}, {1, 0}, {comm.DefaultChunk + 1, 0}, {1000, 1}, {1000, 999}, {1000, 1000}, {1000, 1 << 40}} {
		err := comm.Run(2, func(c comm.Comm) error {
			src := make([]byte, tc.n)
			for i := range src {
				src[i] = byte(i * 13)
			}
			if c.Rank() == 0 {
				return comm.SendChunked(c, 1, 3, src, tc.chunk)
			}
			buf := make([]byte, tc.n+5)
			got, err := comm.RecvChunked(c, 0, 3, buf, tc.chunk)
			if err != nil {
				return err
			}
			assert.Equal(t, tc.n, got)
			assert.Equal(t, src, buf[:got])
			return nil
		}, comm.WithTimeout(10*time.Second))
		require.NoError(t, err, "n=%d chunk=%d", tc.n, tc.chunk)
	}
}

// TestSplitNodeHashCollision puts two nodes whose names fall in one hash
// group ("node14479" and "node586486" share fnv-32a's low 30 bits) on
// alternating ranks: SplitNode must still tell them apart.
func TestSplitNodeHashCollision(t *testing.T) {
	names := []string{"node586486", "node14479", "node586486", "other", "node14479"}
	type got struct {
		members     []int
		index, nods int
	}
	res := make([]got, len(names))
	require.NoError(t, comm.Run(len(names), func(c comm.Comm) error {
		node, index, count, err := comm.SplitNode(c, func() string { return names[c.Rank()] })
		if err != nil {
			return err
		}
		defer node.Close()
		all, err := comm.AllgatherBytes(node, []byte{byte(c.Rank())})
		if err != nil {
			return err
		}
		g := got{index: index, nods: count}
		for _, b := range all {
			g.members = append(g.members, int(b[0]))
		}
		res[c.Rank()] = g
		return nil
	}, comm.WithTimeout(10*time.Second)))
	want := []got{{[]int{0, 2}, 0, 3}, {[]int{1, 4}, 1, 3}, {[]int{0, 2}, 0, 3}, {[]int{3}, 2, 3}, {[]int{1, 4}, 1, 3}}
	assert.Equal(t, want, res)
}
