package partner

import "sync"

// Buffers recycles transfer blocks between calls, so that a checkpoint
// does not fault in fresh memory for its blocks every time (on some
// virtual machines first-touch page faults cost more than the copy). The
// caller owns it, typically one per process shared by every rank; it is
// safe for concurrent use. A nil *Buffers allocates every time.
type Buffers struct {
	mu   sync.Mutex
	free map[int][][]byte
	// Keep bounds the blocks kept per size (0 means 64).
	Keep int
}

// minPooled is the smallest block worth recycling.
const minPooled = 64 << 10

// get returns a block of n bytes (contents undefined).
func (b *Buffers) get(n int) []byte {
	if b == nil || n < minPooled {
		return make([]byte, n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if l := b.free[n]; len(l) > 0 {
		buf := l[len(l)-1]
		b.free[n] = l[:len(l)-1]
		return buf
	}
	return make([]byte, n)
}

// put returns a block obtained from get.
func (b *Buffers) put(buf []byte) {
	n := cap(buf)
	if b == nil || n < minPooled {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.free == nil {
		b.free = map[int][][]byte{}
	}
	keep := b.Keep
	if keep <= 0 {
		keep = 64
	}
	if len(b.free[n]) < keep {
		b.free[n] = append(b.free[n], buf[:n])
	}
}
