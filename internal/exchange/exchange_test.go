package exchange

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
)

// counted counts the bytes a rank receives through point-to-point calls
// and broadcasts.
type counted struct {
	comm.Comm
	recv *atomic.Int64
}

func (c counted) Recv(src, tag int, buf []byte) (int, error) {
	n, err := c.Comm.Recv(src, tag, buf)
	c.recv.Add(int64(n))
	return n, err
}

func (c counted) Sendrecv(send []byte, dst, st int, recv []byte, src, rt int) (int, error) {
	n, err := c.Comm.Sendrecv(send, dst, st, recv, src, rt)
	c.recv.Add(int64(n))
	return n, err
}

func (c counted) Bcast(root int, buf []byte) error {
	if c.Rank() != root {
		c.recv.Add(int64(len(buf)))
	}
	return c.Comm.Bcast(root, buf)
}

func run(t *testing.T, p int, fn func(c comm.Comm) error) {
	t.Helper()
	require.NoError(t, comm.Run(p, fn, comm.WithTimeout(60*time.Second)))
}

// payload is the deterministic content of message i from src to dst.
func payload(src, dst, i int) []byte {
	return []byte(fmt.Sprintf("%d->%d#%d:%s", src, dst, i, bytes.Repeat([]byte{byte(src + dst + i)}, (src*7+dst*3+i)%40)))
}

// TestSparseDelivers: random sparse patterns on worlds of every shape
// reach their destinations, in order per source, and nothing else
// arrives; a world of one rank keeps its own messages.
func TestSparseDelivers(t *testing.T) {
	for _, p := range []int{1, 2, 3, 5, 8, 13, 64} {
		t.Run(fmt.Sprint(p), func(t *testing.T) {
			// plan[src] lists the destinations of src's messages, in order.
			rng := rand.New(rand.NewPCG(uint64(p), 7))
			plan := make([][]int, p)
			for s := range plan {
				for range rng.IntN(4) {
					plan[s] = append(plan[s], rng.IntN(p))
				}
				if s%3 == 0 {
					plan[s] = append(plan[s], s, (s+p/2)%p) // to itself and across
				}
			}
			run(t, p, func(c comm.Comm) error {
				me := c.Rank()
				var out []Msg
				for i, d := range plan[me] {
					out = append(out, Msg{Peer: d, Data: payload(me, d, i)})
				}
				got, err := Sparse(c, 7, out)
				if err != nil {
					return err
				}
				var want []Msg
				for s := range p {
					for i, d := range plan[s] {
						if d == me {
							want = append(want, Msg{Peer: s, Data: payload(s, d, i)})
						}
					}
				}
				if len(got) != len(want) {
					return fmt.Errorf("rank %d: %d messages, want %d", me, len(got), len(want))
				}
				for i := range want {
					if got[i].Peer != want[i].Peer || !bytes.Equal(got[i].Data, want[i].Data) {
						return fmt.Errorf("rank %d: message %d is %d:%q, want %d:%q", me, i, got[i].Peer, got[i].Data, want[i].Peer, want[i].Data)
					}
				}
				return nil
			})
		})
	}
}

// TestSparseRefusesBadDestination: a destination outside the world is
// refused before anything moves (every rank passes one here, so no rank
// is left waiting).
func TestSparseRefusesBadDestination(t *testing.T) {
	run(t, 3, func(c comm.Comm) error {
		_, err := Sparse(c, 1, []Msg{{Peer: 3, Data: []byte("x")}})
		if !errors.Is(err, ErrBadMessage) {
			return fmt.Errorf("rank %d: %v, want ErrBadMessage", c.Rank(), err)
		}
		return nil
	})
}

// TestDecodeRefusesDamage: a transfer cut short or naming a rank out of
// range is an error, never a panic.
func TestDecodeRefusesDamage(t *testing.T) {
	good := encode([]item{{src: 1, dst: 2, data: []byte("abc")}})
	_, err := decode(good, 3)
	require.NoError(t, err)
	for i := 1; i < len(good); i++ {
		_, err := decode(good[:i], 3)
		assert.ErrorIs(t, err, ErrBadMessage, "cut at %d", i)
	}
	_, err = decode(good, 2)
	assert.ErrorIs(t, err, ErrBadMessage, "destination 2 in a world of 2")
}

// FuzzDecode: any transfer decodes or is refused.
func FuzzDecode(f *testing.F) {
	f.Add(encode([]item{{src: 0, dst: 1, data: []byte("hello")}, {src: 2, dst: 3}}), 4)
	f.Add([]byte{}, 1)
	f.Fuzz(func(t *testing.T, b []byte, p int) {
		if p < 1 || p > 1<<20 {
			return
		}
		its, err := decode(b, p)
		if err != nil {
			assert.ErrorIs(t, err, ErrBadMessage)
			return
		}
		for _, it := range its {
			assert.Less(t, it.src, p)
			assert.Less(t, it.dst, p)
		}
		assert.True(t, bytes.Equal(b, encode(its)), "re-encoding gives the same bytes")
	})
}

// TestSparseCostPerRank: a pattern in which each rank sends one small
// message to a rank far away and one to its neighbour costs a rank the
// same bytes received at 64 and at 1024 ranks, but for the log2 P
// rounds' 8-byte headers and the messages routed through it (at most
// log2 P hops each).
func TestSparseCostPerRank(t *testing.T) {
	perRank := map[int]int64{}
	for _, p := range []int{64, 1024} {
		var total atomic.Int64
		var worst atomic.Int64
		run(t, p, func(c comm.Comm) error {
			var n atomic.Int64
			cc := counted{Comm: c, recv: &n}
			me := c.Rank()
			out := []Msg{{Peer: (me + 1) % p, Data: make([]byte, 100)}, {Peer: (me*37 + 11) % p, Data: make([]byte, 100)}}
			got, err := Sparse(cc, 3, out)
			if err != nil {
				return err
			}
			for _, m := range got {
				if len(m.Data) != 100 {
					return fmt.Errorf("rank %d: %d bytes from %d", me, len(m.Data), m.Peer)
				}
			}
			total.Add(n.Load())
			for {
				w := worst.Load()
				if n.Load() <= w || worst.CompareAndSwap(w, n.Load()) {
					break
				}
			}
			return nil
		})
		perRank[p] = total.Load() / int64(p)
		t.Logf("%d ranks: %d bytes received per rank on average, %d at most", p, perRank[p], worst.Load())
		// Two messages of 116 bytes on the wire, each at most log2 P hops,
		// and two 8-byte length headers per round.
		logP := int64(0)
		for 1<<logP < p {
			logP++
		}
		assert.LessOrEqual(t, perRank[p], 2*116*logP+16*logP+16*logP)
	}
}

// TestMerge: a merge that concatenates sees every rank's value once, in
// rank order, on every rank; one that keeps the smallest stays small.
func TestMerge(t *testing.T) {
	for _, p := range []int{1, 2, 3, 7, 16, 33} {
		run(t, p, func(c comm.Comm) error {
			cat := func(lo, hi []byte) []byte { return append(append([]byte(nil), lo...), hi...) }
			got, err := Merge(c, 5, []byte{byte(c.Rank())}, cat)
			if err != nil {
				return err
			}
			want := make([]byte, p)
			for i := range want {
				want[i] = byte(i)
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("rank %d: %v, want %v", c.Rank(), got, want)
			}
			low := func(lo, hi []byte) []byte {
				if binary.LittleEndian.Uint64(hi) < binary.LittleEndian.Uint64(lo) {
					return hi
				}
				return lo
			}
			v := binary.LittleEndian.AppendUint64(nil, uint64((c.Rank()*5+3)%p))
			got, err = Merge(c, 5, v, low)
			if err != nil {
				return err
			}
			if binary.LittleEndian.Uint64(got) != 0 {
				return fmt.Errorf("rank %d: minimum %d", c.Rank(), binary.LittleEndian.Uint64(got))
			}
			return nil
		})
	}
}

// TestExScan: the exclusive prefix sum of rank+1.
func TestExScan(t *testing.T) {
	for _, p := range []int{1, 2, 5, 8, 31} {
		run(t, p, func(c comm.Comm) error {
			got, err := ExScan(c, 9, int64(c.Rank()+1))
			if err != nil {
				return err
			}
			r := int64(c.Rank())
			if want := r * (r + 1) / 2; got != want {
				return fmt.Errorf("rank %d: %d, want %d", r, got, want)
			}
			return nil
		})
	}
}

// TestReply: questions routed by Sparse are answered straight back, one
// answer per rank asked, empty ones too.
func TestReply(t *testing.T) {
	for _, p := range []int{1, 2, 5, 16} {
		run(t, p, func(c comm.Comm) error {
			me := c.Rank()
			asked := []int{(me + 1) % p, (me * 3) % p}
			if asked[0] == asked[1] {
				asked = asked[:1]
			}
			var out []Msg
			for _, q := range asked {
				out = append(out, Msg{Peer: q, Data: []byte(fmt.Sprint(me))})
			}
			in, err := Sparse(c, 4, out)
			if err != nil {
				return err
			}
			answers := map[int][]byte{}
			for _, m := range in {
				if m.Peer%2 == 0 {
					answers[m.Peer] = []byte(fmt.Sprintf("%d answers %s", me, m.Data))
				} else {
					answers[m.Peer] = nil // an empty answer still goes
				}
			}
			got, err := Reply(c, 6, asked, answers)
			if err != nil {
				return err
			}
			for _, q := range asked {
				want := ""
				if me%2 == 0 {
					want = fmt.Sprintf("%d answers %d", q, me)
				}
				if string(got[q]) != want {
					return fmt.Errorf("rank %d: %q from rank %d, want %q", me, got[q], q, want)
				}
			}
			return nil
		})
	}
}
