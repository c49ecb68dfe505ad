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
// the messages and bytes each rank receives, the metadata bytes it
// decodes ([Engine.Work]), and the bytes it reads from the global area
// (where the L4 container lies: a rank opening its task must not read
// every rank's metadata).

// share is what one rank received and decoded in one phase.
type share struct {
	msgs, bytes, decoded, read int64
}

// scaleRun is one world of the scale test and what its ranks did.
type scaleRun struct {
	n      int
	phases []string
	shares map[string][]share // phase -> per rank
}

// scalePartRanks is the block of ranks one part lists in the scale test:
// small, so that even the smaller world has leaders besides rank 0.
const scalePartRanks = 16

// scalePhases runs the scale scenario on n in-process ranks (node size 4,
// groups of 4 nodes, 1 KiB per rank, parts of 16 ranks) and returns each rank's share of
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
	// Each rank reads the global area through a driver of its own, which
	// counts the bytes it reads.
	global := make([]*vfd.Log, n)
	world := func(fn func(e *Engine) error) {
		require.NoError(t, comm.Run(n, func(c comm.Comm) error {
			global[c.Rank()] = vfd.NewLog(d, nil)
			env := &Env{Comm: c, Topo: topo, Rank: c.Rank(),
				Local:  Store{d, filepath.Join(root, "local", topo.NodeDir(topo.NodeOf(c.Rank())))},
				Global: Store{global[c.Rank()], filepath.Join(root, "global")},
				Meta:   Store{d, filepath.Join(root, "meta")}}
			e, err := NewEngine(env, Config{Levels: levels, Policy: keepAll{}, PartRanks: scalePartRanks})
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
		g := global[e.env.Rank]
		before, d0, r0 := comm.CountsOf(c), e.Work().Decoded, g.Stats().BytesRead
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		e.Wait()
		got := comm.CountsOf(c).Sub(before)
		s := share{got.Received, got.BytesReceived, e.Work().Decoded - d0, g.Stats().BytesRead - r0}
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

// most returns the largest share of the ranks that lead no part, of the
// part leaders other than rank 0, and rank 0's.
func (sr *scaleRun) most(phase string) (members, leaders, rank0 share) {
	top := func(m *share, s share) {
		m.msgs = max(m.msgs, s.msgs)
		m.bytes = max(m.bytes, s.bytes)
		m.decoded = max(m.decoded, s.decoded)
		m.read = max(m.read, s.read)
	}
	for r, s := range sr.shares[phase] {
		switch {
		case r == 0:
			rank0 = s
		case r%scalePartRanks == 0:
			top(&leaders, s)
		default:
			top(&members, s)
		}
	}
	return members, leaders, rank0
}

// TestScaleShareIsFlat runs the scale scenario at 64 ranks and at 2,048
// (fewer under the race detector or -short). It fails when a rank that
// leads no part, or a part's leader, receives or decodes more than 1.5
// times as much at the larger size, in any phase (Open, each level's
// commit, the restart, each recovery). Rank 0, which reads and writes
// the roots, may grow with the number of parts, never faster.
func TestScaleShareIsFlat(t *testing.T) {
	small, big := 64, 2048
	switch {
	case raceEnabled:
		big = 512 // the race detector's goroutines are costly
	case testing.Short():
		big = 1024
	}
	a, b := scalePhases(t, small), scalePhases(t, big)
	var report strings.Builder
	fmt.Fprintf(&report, "%-22s %-8s %38s %38s\n", "phase", "ranks", fmt.Sprintf("%d: msgs/bytes/decoded/read", small), fmt.Sprintf("%d", big))
	for _, p := range a.phases {
		ma, la, ra := a.most(p)
		mb, lb, rb := b.most(p)
		for _, role := range []struct {
			name string
			x, y share
		}{{"members", ma, mb}, {"leaders", la, lb}} {
			x, y := role.x, role.y
			fmt.Fprintf(&report, "%-22s %-8s %8d %9d %9d %9d  %8d %9d %9d %9d\n", p, role.name,
				x.msgs, x.bytes, x.decoded, x.read, y.msgs, y.bytes, y.decoded, y.read)
			grows := func(what string, x, y int64) {
				// A flat share; the slack absorbs a few bytes of headers
				// and the O(log N) steps of the tree collectives.
				assert.LessOrEqual(t, y, x*3/2+256, "%s: %s: %s per rank grows from %d at %d ranks to %d at %d",
					p, role.name, what, x, small, y, big)
			}
			grows("messages received", x.msgs, y.msgs)
			grows("bytes received", x.bytes, y.bytes)
			grows("bytes decoded", x.decoded, y.decoded)
			grows("bytes read from the global area", x.read, y.read)
		}
		fmt.Fprintf(&report, "%-22s %-8s %8d %9d %9d %9d  %8d %9d %9d %9d\n", p, "rank 0", ra.msgs, ra.bytes, ra.decoded, ra.read, rb.msgs, rb.bytes, rb.decoded, rb.read)
		// Rank 0 reads one reference per part: linear in the parts at
		// most, never in the ranks squared.
		ratio := int64(big / small)
		assert.LessOrEqual(t, rb.bytes, ra.bytes*ratio*3/2+256, "%s: rank 0's bytes grow faster than the ranks", p)
		assert.LessOrEqual(t, rb.msgs, ra.msgs*ratio*3/2+256, "%s: rank 0's messages grow faster than the ranks", p)
	}
	// Every phase did work worth measuring: a share of zero proves nothing.
	for _, p := range a.phases {
		m, l, _ := b.most(p)
		assert.Positive(t, m.bytes, "%s: members received nothing", p)
		assert.Positive(t, l.bytes, "%s: leaders received nothing", p)
	}
	t.Logf("counted work per rank:\n%s", report.String())
}
