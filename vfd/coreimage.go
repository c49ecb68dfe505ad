package vfd

import (
	"sync/atomic"
)

// corePageSize is the unit in which core files hold their bytes.
const corePageSize = 64 << 10

// corePage is one page of a core file. A frozen page belongs to a synced
// snapshot and is never written again; a write to it copies it first, so
// Sync and CrashClone share pages instead of copying bytes.
type corePage struct {
	frozen atomic.Bool
	b      [corePageSize]byte
}

// coreImage is the content of a core file: a size and pages, where a nil
// page is a hole of zeros. Bytes of allocated pages at or past size are
// always zero. The owner locks.
type coreImage struct {
	pages []*corePage
	size  int64
	// dirty lists the pages allocated or copied since the last freeze or
	// syncTo, which are the only unfrozen ones.
	dirty []int
	// reshaped says a truncate ran since then: syncTo then takes the
	// whole page table.
	reshaped bool
}

// freeze marks every page frozen and returns a snapshot sharing them.
func (m *coreImage) freeze() coreImage {
	for _, p := range m.pages {
		if p != nil && !p.frozen.Load() {
			p.frozen.Store(true)
		}
	}
	m.dirty, m.reshaped = m.dirty[:0], false
	return coreImage{pages: append([]*corePage(nil), m.pages...), size: m.size}
}

// syncTo makes s, the snapshot taken by the last freeze or syncTo of m
// (and owned by the caller), equal to m's current content. It freezes
// and copies only the pages written since: a Sync costs what was written,
// not the file's size (16,384 in-process ranks each syncing its task of
// one shared L4 container cost O(N^2) when every Sync froze every page).
func (m *coreImage) syncTo(s *coreImage) {
	if m.reshaped || len(s.pages) > len(m.pages) {
		*s = m.freeze()
		return
	}
	for len(s.pages) < len(m.pages) {
		s.pages = append(s.pages, nil)
	}
	for _, i := range m.dirty {
		if i < len(m.pages) {
			if p := m.pages[i]; p != nil {
				p.frozen.Store(true)
			}
			s.pages[i] = m.pages[i]
		}
	}
	s.size = m.size
	m.dirty = m.dirty[:0]
}

// writable returns page i ready to be written, allocating or copying it.
func (m *coreImage) writable(i int) *corePage {
	p := m.pages[i]
	switch {
	case p == nil:
		p = new(corePage)
		m.pages[i] = p
		m.dirty = append(m.dirty, i)
	case p.frozen.Load():
		q := new(corePage)
		q.b = p.b
		p = q
		m.pages[i] = p
		m.dirty = append(m.dirty, i)
	}
	return p
}

func (m *coreImage) readAt(b []byte, off int64) int {
	if off >= m.size {
		return 0
	}
	b = b[:min(int64(len(b)), m.size-off)]
	for done := 0; done < len(b); {
		pos := off + int64(done)
		i, po := int(pos/corePageSize), int(pos%corePageSize)
		var n int
		if i < len(m.pages) && m.pages[i] != nil {
			n = copy(b[done:], m.pages[i].b[po:])
		} else {
			n = min(len(b)-done, corePageSize-po)
			clear(b[done : done+n])
		}
		done += n
	}
	return len(b)
}

func (m *coreImage) writeAt(b []byte, off int64) {
	end := off + int64(len(b))
	if need := int((end + corePageSize - 1) / corePageSize); need > len(m.pages) {
		if need > cap(m.pages) {
			np := make([]*corePage, len(m.pages), max(need, 2*cap(m.pages)))
			copy(np, m.pages)
			m.pages = np
		}
		m.pages = m.pages[:need]
	}
	for done := 0; done < len(b); {
		pos := off + int64(done)
		i, po := int(pos/corePageSize), int(pos%corePageSize)
		done += copy(m.writable(i).b[po:], b[done:])
	}
	m.size = max(m.size, end)
}

func (m *coreImage) truncate(size int64) {
	if size < m.size {
		m.reshaped = true
		keep := min(int((size+corePageSize-1)/corePageSize), len(m.pages))
		clear(m.pages[keep:])
		m.pages = m.pages[:keep]
		last := int(size / corePageSize) // the page holding byte size, if any
		if po := int(size % corePageSize); po != 0 && last < len(m.pages) && m.pages[last] != nil {
			clear(m.writable(last).b[po:])
		}
	}
	m.size = size
}

// bytes returns a copy of the whole content.
func (m *coreImage) bytes() []byte {
	b := make([]byte, m.size)
	m.readAt(b, 0)
	return b
}

// imageOf returns a frozen image holding b.
func imageOf(b []byte) coreImage {
	var m coreImage
	m.writeAt(b, 0)
	return m
}
