package levels

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// The scale test: a rank's share of every collective path must not grow
// with the number of ranks. It is measured as counted work, not time:
// the messages and bytes each rank receives, and the metadata bytes it
// decodes ([Engine.Work]).

// share is what one rank received and decoded in one phase.
type share struct {
	msgs, bytes, decoded int64
}

// scaleRun is one world of the scale test and what its ranks did.
type scaleRun struct {
	n      int
	phases []string
	shares map[string][]share // phase -> per rank
}

// scalePhases runs the scale scenario on n in-process ranks (node size 4,
// groups of 4 nodes, 1 KiB per rank) and returns each rank's share of
// every phase: a fresh Open; checkpoints at L1, L2, L3 and L4; a restart
// that lost node 1 (Open); and the recovery of the L2, L3 and L4
// checkpoints.
func scalePhases(t *testing.T, n int) *scaleRun {
	const nodeSize, groupSize, size = 4, 4, 1024
	topo, err := partner.NewTopology(n, nodeSize, groupSize, nil)
	require.NoError(t, err)
	d := vfd.NewCore()
	root := "/scale"
	sr := &scaleRun{n: n, shares: map[string][]share{}}
	levels := []Level{Local1{}, Partner2{}, RS3{}, Global4{Inline: true}}
	var mu sync.Mutex
	world := func(fn func(e *Engine) error) {
		require.NoError(t, comm.Run(n, func(c comm.Comm) error {
			env := &Env{Comm: c, Topo: topo, Rank: c.Rank(),
				Local:  Store{d, filepath.Join(root, "local", topo.NodeDir(topo.NodeOf(c.Rank())))},
				Global: Store{d, filepath.Join(root, "global")},
				Meta:   Store{d, filepath.Join(root, "meta")}}
			e, err := NewEngine(env, Config{Levels: levels, Policy: keepAll{}})
			if err != nil {
				return err
			}
			defer e.Release()
			return fn(e)
		}, comm.WithTimeout(5*time.Minute)))
	}
	// phase measures fn on every rank (comm's counters; the barriers
	// around it carry no bytes).
	phase := func(e *Engine, name string, fn func() error) error {
		c := e.env.Comm
		if err := c.Barrier(); err != nil {
			return err
		}
		before, d0 := comm.CountsOf(c), e.Work().Decoded
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		e.Wait()
		got := comm.CountsOf(c).Sub(before)
		s := share{got.Received, got.BytesReceived, e.Work().Decoded - d0}
		mu.Lock()
		if sr.shares[name] == nil {
			sr.shares[name] = make([]share, n)
			sr.phases = append(sr.phases, name)
		}
		sr.shares[name][e.env.Rank] = s
		mu.Unlock()
		return c.Barrier()
	}
	world(func(e *Engine) error {
		if err := phase(e, "open", e.Open); err != nil {
			return err
		}
		for i, l := range []ID{L1, L2, L3, L4} {
			id := int64(i + 1)
			if err := phase(e, "checkpoint "+l.String(), func() error {
				_, _, err := e.Checkpoint(id, l, writeBytes(payload(0, id, size)))
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	require.NoError(t, d.RemoveAll(filepath.Join(root, "local", topo.NodeDir(1))))
	world(func(e *Engine) error {
		if err := phase(e, "restart, node 1 lost", e.Open); err != nil {
			return err
		}
		c := e.Committed()
		if len(c) != 4 {
			return fmt.Errorf("%d committed", len(c))
		}
		for _, m := range c[1:] {
			if err := phase(e, "recover "+m.Level.String(), func() error {
				src, err := e.RecoverOne(m)
				if err != nil {
					return err
				}
				b, err := readSource(src)
				if err == nil && string(b) != string(payload(0, m.ID, size)) {
					err = fmt.Errorf("rank %d: %v data differs", e.env.Rank, m.Level)
				}
				return err
			}); err != nil {
				return err
			}
		}
		return nil
	})
	return sr
}

// most returns the largest share of the ranks other than rank 0, and
// rank 0's.
func (sr *scaleRun) most(phase string) (others, rank0 share) {
	for r, s := range sr.shares[phase] {
		if r == 0 {
			rank0 = s
			continue
		}
		others.msgs = max(others.msgs, s.msgs)
		others.bytes = max(others.bytes, s.bytes)
		others.decoded = max(others.decoded, s.decoded)
	}
	return others, rank0
}

// TestScaleShareIsFlat runs the scale scenario at two sizes, 4 to 8
// times apart, and fails when any rank but rank 0 receives or decodes more than
// 1.5 times as much at the larger one, in any phase; rank 0, which reads
// and writes the roots, may grow with the number of parts, never faster.
func TestScaleShareIsFlat(t *testing.T) {
	small, big := 256, 2048
	switch {
	case raceEnabled:
		small, big = 128, 512 // the race detector's goroutines are costly
	case testing.Short():
		small, big = 128, 1024
	}
	a, b := scalePhases(t, small), scalePhases(t, big)
	var report strings.Builder
	fmt.Fprintf(&report, "%-22s %28s %28s\n", "phase (max of ranks > 0)", fmt.Sprintf("%d ranks: msgs/bytes/decoded", small), fmt.Sprintf("%d ranks", big))
	for _, p := range a.phases {
		sa, ra := a.most(p)
		sb, rb := b.most(p)
		fmt.Fprintf(&report, "%-22s %8d %9d %9d  %8d %9d %9d   rank 0: %d/%d -> %d/%d\n", p,
			sa.msgs, sa.bytes, sa.decoded, sb.msgs, sb.bytes, sb.decoded, ra.msgs, ra.bytes, rb.msgs, rb.bytes)
		grows := func(what string, x, y int64) {
			// A flat share; the slack absorbs a few bytes of headers.
			assert.LessOrEqual(t, y, x*3/2+256, "%s: %s per rank grows from %d at %d ranks to %d at %d", p, what, x, small, y, big)
		}
		grows("messages received", sa.msgs, sb.msgs)
		grows("bytes received", sa.bytes, sb.bytes)
		grows("bytes decoded", sa.decoded, sb.decoded)
		// Rank 0 reads one reference per part: linear in the parts at
		// most, never in the ranks squared.
		ratio := int64(big / small)
		assert.LessOrEqual(t, rb.bytes, ra.bytes*ratio*3/2+256, "%s: rank 0's bytes grow faster than the ranks", p)
		assert.LessOrEqual(t, rb.msgs, ra.msgs*ratio*3/2+256, "%s: rank 0's messages grow faster than the ranks", p)
	}
	t.Logf("counted work per rank:\n%s", report.String())
}
