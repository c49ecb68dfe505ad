package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// isTerminal reports whether w is a file descriptor attached to a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress draws one status line on a terminal: a bar with a count, or
// with bytes. A nil *progress draws nothing, so callers need not check
// whether progress is wanted. It is safe for concurrent use.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	now   func() time.Time
	label string
	total int64
	bytes bool
	n     int64
	last  time.Time
	drawn bool
}

// minRedraw is the shortest interval between two redraws.
const minRedraw = 100 * time.Millisecond

// newProgress returns a progress line for label on standard error, or nil
// when standard error is not a terminal or the output is JSON.
func (a *app) newProgress(jsonOut bool, label string, total int64, bytes bool) *progress {
	if jsonOut || !a.isTerminal(a.stderr) {
		return nil
	}
	return &progress{w: a.stderr, now: a.now, label: label, total: total, bytes: bytes}
}

// Add advances the count by n and redraws when the last redraw is old
// enough or the end is reached.
func (p *progress) Add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	if t := p.now(); !p.drawn || p.n >= p.total || t.Sub(p.last) >= minRedraw {
		p.draw(t)
	}
}

// Done draws the final state and ends the line.
func (p *progress) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(p.now())
	fmt.Fprintln(p.w)
}

func (p *progress) draw(t time.Time) {
	const width = 30
	fill := width
	if p.total > 0 {
		fill = int(min(width*p.n/p.total, width))
	}
	count := fmt.Sprintf("%d/%d", p.n, p.total)
	if p.bytes {
		count = fmt.Sprintf("%.1f/%.1f MiB", float64(p.n)/(1<<20), float64(p.total)/(1<<20))
	}
	// \r returns to the line's start, \x1b[K clears what a longer line left.
	fmt.Fprintf(p.w, "\r%s [%s%s] %s\x1b[K", p.label, strings.Repeat("#", fill), strings.Repeat(".", width-fill), count)
	p.last, p.drawn = t, true
}

// progressReader counts the bytes read through it on a progress line.
type progressReader struct {
	r io.Reader
	p *progress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.Add(int64(n))
	return n, err
}

// activity is a status line for a step whose progress cannot be counted:
// its label and the elapsed time, redrawn every interval until Stop. A
// nil *activity draws nothing.
type activity struct {
	w     io.Writer
	now   func() time.Time
	label string
	start time.Time
	stop  chan struct{}
	done  chan struct{}
}

// startActivity starts a status line for label on standard error when it
// is a terminal and the output is not JSON; otherwise it returns nil.
func (a *app) startActivity(jsonOut bool, label string) *activity {
	if jsonOut || !a.isTerminal(a.stderr) {
		return nil
	}
	s := &activity{w: a.stderr, now: a.now, label: label, start: a.now(), stop: make(chan struct{}), done: make(chan struct{})}
	s.draw()
	go func() {
		defer close(s.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.draw()
			}
		}
	}()
	return s
}

func (s *activity) draw() {
	fmt.Fprintf(s.w, "\r%s %.1fs\x1b[K", s.label, s.now().Sub(s.start).Seconds())
}

// Stop ends the redrawing and finishes the line with result.
func (s *activity) Stop(result string) {
	if s == nil {
		return
	}
	close(s.stop)
	<-s.done
	fmt.Fprintf(s.w, "\r%s %s in %.1fs\x1b[K\n", s.label, result, s.now().Sub(s.start).Seconds())
}
