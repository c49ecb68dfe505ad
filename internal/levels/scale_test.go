package levels

import (
	"fmt"
	"path/filepath"
	"runtime"
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
	alloc  map[string]int64   // phase -> bytes allocated per rank
}

// scalePartRanks is the block of ranks one part lists in the scale test:
// small, so that even the smaller world has leaders besides rank 0.
const scalePartRanks = 16

// scaleAllocSlack is the growth of the bytes allocated per rank the
// scale test forgives on top of 1.5 times: a few tree steps and the
// runtime's own bookkeeping, far below one entry per rank.
const scaleAllocSlack = 2048

// scaleAllocKnown lists the phases whose allocations per rank still grow
// with the ranks, and why. Remove an entry once its path is fixed.
var scaleAllocKnown = map[string]string{}

// scalePhases runs the scale scenario on n in-process ranks (node size 4,
// groups of 4 nodes, 1 KiB per rank, parts of 16 ranks) and returns each rank's share of
// every phase: a fresh Open; checkpoints at L4, L1, L2 and L3 (L3 the
// newest, which the restart reads ahead); a restart that lost node 1
// (Open); and the recovery of the L4, L2 and L3
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
	// alloc is, per phase, the bytes the process allocated while the
	// ranks ran it, over the ranks (measured by rank 0 between barriers
	// that hold every other rank).
	alloc := map[string]int64{}
	memNow := func() int64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.TotalAlloc)
	}
	// measure runs fn on every rank of c between barriers: comm's
	// counters on every rank (the barriers carry no bytes), the metadata
	// bytes decoded (work, before and after), and the process's
	// allocations.
	measure := func(c comm.Comm, name string, work func() int64, fn func() error) error {
		var m0 int64
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			m0 = memNow()
		}
		if err := c.Barrier(); err != nil {
			return err
		}
		g := global[c.Rank()]
		before, d0, r0 := comm.CountsOf(c), work(), g.Stats().BytesRead
		if err := fn(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		got := comm.CountsOf(c).Sub(before)
		s := share{got.Received, got.BytesReceived, work() - d0, g.Stats().BytesRead - r0}
		mu.Lock()
		if sr.shares[name] == nil {
			sr.shares[name] = make([]share, n)
			sr.phases = append(sr.phases, name)
		}
		sr.shares[name][c.Rank()] = s
		mu.Unlock()
		if err := c.Barrier(); err != nil {
			return err
		}
		if c.Rank() == 0 {
			mu.Lock()
			alloc[name] = (memNow() - m0) / int64(n)
			mu.Unlock()
		}
		return c.Barrier()
	}
	world := func(name string, fn func(e *Engine) error) {
		require.NoError(t, comm.Run(n, func(c comm.Comm) error {
			global[c.Rank()] = vfd.NewLog(d, nil)
			env := &Env{Comm: c, Topo: topo, Rank: c.Rank(),
				Local:  Store{d, filepath.Join(root, "local", topo.NodeDir(topo.NodeOf(c.Rank())))},
				Global: Store{global[c.Rank()], filepath.Join(root, "global")},
				Meta:   Store{d, filepath.Join(root, "meta")}}
			var e *Engine
			// An engine's construction is part of every start-up: it
			// must not be O(ranks) either.
			if err := measure(c, name, func() int64 { return 0 }, func() error {
				var err error
				e, err = NewEngine(env, Config{Levels: levels, Policy: keepAll{}, PartRanks: scalePartRanks})
				return err
			}); err != nil {
				return err
			}
			defer e.Release()
			return fn(e)
		}, comm.WithTimeout(5*time.Minute)))
	}
	phase := func(e *Engine, name string, fn func() error) error {
		return measure(e.env.Comm, name, func() int64 { return e.Work().Decoded }, func() error {
			err := fn()
			e.Wait()
			return err
		})
	}
	world("new engine", func(e *Engine) error {
		if err := phase(e, "open", e.Open); err != nil {
			return err
		}
		for i, l := range []ID{L4, L1, L2, L3} {
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
	world("new engine, restart", func(e *Engine) error {
		if err := phase(e, "restart, node 1 lost", e.Open); err != nil {
			return err
		}
		c := e.Committed()
		if len(c) != 4 {
			return fmt.Errorf("%d committed", len(c))
		}
		for _, m := range c {
			if m.Level == L1 {
				continue // node 1's L1 files are gone with it
			}
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
	sr.alloc = alloc
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
		// Allocations, over every rank: what a rank's own work costs in
		// memory must not grow with the ranks either. The slack absorbs
		// the tree collectives' O(log N) steps and the runtime's noise.
		xa, ya := a.alloc[p], b.alloc[p]
		fmt.Fprintf(&report, "%-22s %-8s %28d %28d\n", p, "alloc/rk", xa, ya)
		if why, ok := scaleAllocKnown[p]; ok {
			t.Logf("%s: allocations per rank not checked (%s): %d at %d ranks, %d at %d", p, why, xa, small, ya, big)
			continue
		}
		assert.LessOrEqual(t, ya, xa*3/2+scaleAllocSlack, "%s: bytes allocated per rank grow from %d at %d ranks to %d at %d",
			p, xa, small, ya, big)
		// Rank 0 reads one reference per part: linear in the parts at
		// most, never in the ranks squared.
		ratio := int64(big / small)
		assert.LessOrEqual(t, rb.bytes, ra.bytes*ratio*3/2+256, "%s: rank 0's bytes grow faster than the ranks", p)
		assert.LessOrEqual(t, rb.msgs, ra.msgs*ratio*3/2+256, "%s: rank 0's messages grow faster than the ranks", p)
	}
	// Every phase did work worth measuring: a share of zero proves nothing.
	for _, p := range a.phases {
		assert.Positive(t, b.alloc[p], "%s: nothing allocated", p)
		if strings.HasPrefix(p, "new engine") {
			continue // local: it receives nothing
		}
		m, l, _ := b.most(p)
		assert.Positive(t, m.bytes, "%s: members received nothing", p)
		assert.Positive(t, l.bytes, "%s: leaders received nothing", p)
	}
	t.Logf("counted work per rank:\n%s", report.String())
}
