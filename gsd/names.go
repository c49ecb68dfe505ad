package gsd

import (
	"fmt"
	"io"
)

// maxNameBytes bounds the bytes of names (with their NULs) a namelist may
// hold. The format sets no limit; 65535 names of 1 KiB fit. The writer
// refuses to go beyond it, and the reader reports a longer list as
// corrupt instead of allocating what a damaged or hostile file claims.
const maxNameBytes = 64 << 20

// nameReadSize is the size of the pieces a namelist block is read in.
const nameReadSize = 64 << 10

// nameScan is what scanNames learned from a namelist block.
type nameScan struct {
	// names are the names before the list's end, each complete.
	names []string
	// offsets are the names' offsets from the start of the block.
	offsets []int64
	// end is the offset where the list ends: the terminating empty name
	// (2.x) or slot (1.0), or the end of what was scanned.
	end int64
	// ended is set when the list ended inside the scanned bytes (by an
	// empty name or, for 2.x, a name whose NUL is the block's last byte).
	ended bool
	// paddedV1 lists the 1.0 slots whose bytes after the name's NUL are
	// not all zero, and unterminatedV1 those without any NUL.
	paddedV1, unterminatedV1 []int
}

// errNamelist describes why a namelist cannot be taken (too many names,
// too many bytes); scanNames returns it, callers wrap it in a
// *CorruptionError.
type errNamelist struct{ reason string }

func (e *errNamelist) Error() string { return e.reason }

// scanNames parses the namelist held in the length bytes at loc: 1.0 fixed
// 64-byte slots, 2.x NUL-terminated names; an empty name ends the list.
// It reads the block in pieces and stops at the end of the list, so what
// it allocates is bounded by the names actually there (never by the block
// size a header claims), and by maxNameBytes. A 2.x name not completed by
// its NUL within length is left out (ended stays false). A read error is
// returned as is; too many names or bytes as an *errNamelist.
func scanNames(r io.ReaderAt, loc, length int64, v1 bool) (nameScan, error) {
	var sc nameScan
	var cur []byte // the name being read (2.x) or the slot (1.0)
	curOff := int64(0)
	total := 0
	buf := make([]byte, min(length, nameReadSize))
	for off := int64(0); off < length && !sc.ended; {
		n := min(int64(len(buf)), length-off)
		b := buf[:n]
		if err := readFull(r, b, loc+off); err != nil {
			return sc, err
		}
		for i := 0; i < len(b) && !sc.ended; i++ {
			pos := off + int64(i)
			c := b[i]
			if v1 {
				if pos%v1NameSize == 0 {
					if c == 0 {
						sc.ended, sc.end = true, pos
						break
					}
					cur, curOff = cur[:0], pos
				}
				cur = append(cur, c)
				if len(cur) < v1NameSize {
					continue
				}
				slot := len(sc.names)
				name := cString(cur)
				if len(name) == len(cur) {
					sc.unterminatedV1 = append(sc.unterminatedV1, slot)
				} else if !allZero(cur[len(name):]) {
					sc.paddedV1 = append(sc.paddedV1, slot)
				}
				if err := sc.add(name, curOff); err != nil {
					return sc, err
				}
				sc.end = pos + 1
				continue
			}
			if c != 0 {
				if len(cur) == 0 {
					curOff = pos
				}
				total++
				if total > maxNameBytes {
					return sc, &errNamelist{fmt.Sprintf("names longer than %d bytes in all", maxNameBytes)}
				}
				cur = append(cur, c)
				continue
			}
			if len(cur) == 0 {
				sc.ended, sc.end = true, pos
				break
			}
			total++
			if err := sc.add(string(cur), curOff); err != nil {
				return sc, err
			}
			cur = cur[:0]
			sc.end = pos + 1
			if sc.end == length {
				sc.ended = true
			}
		}
		off += n
	}
	return sc, nil
}

func (sc *nameScan) add(name string, off int64) error {
	if len(sc.names) >= maxNames {
		return &errNamelist{fmt.Sprintf("more than %d names", maxNames)}
	}
	sc.names = append(sc.names, name)
	sc.offsets = append(sc.offsets, off)
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// zeroFrom reports whether the bytes [loc, loc+n) are all zero, reading
// them in pieces; at returns the offset of the first non-zero byte.
func zeroFrom(r io.ReaderAt, loc, n int64) (ok bool, at int64, err error) {
	buf := make([]byte, min(n, nameReadSize))
	for off := int64(0); off < n; {
		k := min(int64(len(buf)), n-off)
		b := buf[:k]
		if err := readFull(r, b, loc+off); err != nil {
			return false, loc + off, err
		}
		for i, c := range b {
			if c != 0 {
				return false, loc + off + int64(i), nil
			}
		}
		off += k
	}
	return true, 0, nil
}
