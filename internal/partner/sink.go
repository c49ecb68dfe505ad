package partner

import (
	"errors"
	"path"
	"sync/atomic"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// sink writes blocks at increasing offsets with a writer goroutine, hashes
// them, and on finish syncs the file. A sink that drops behind (piece >
// 0) starts the writeback of every piece it wrote and drops each piece
// from the page cache once dropWindow more follow it, and drops the whole
// file after the final sync.
type sink struct {
	pool  *Buffers
	f     vfd.File
	path  string
	work  chan []byte
	free  chan []byte
	done  chan struct{}
	h     *b3.Hasher
	off   int64
	piece int64 // 0: keep the file in the page cache, with no hints
	// noDrop keeps the file in the page cache while its writeback is
	// still started piece by piece (a file read next).
	noDrop bool
	// hinted and dropped are the ends of the ranges whose writeback was
	// started and that were dropped from the cache.
	hinted, dropped int64
	// window is how many pieces behind the write a piece is dropped (0:
	// dropWindow).
	window int64
	err    error // owned by the writer goroutine until done is closed
	// img, when not nil, receives a copy of every byte written.
	img []byte
	// inPlace (with img): buffer lends the blocks of img themselves, so
	// that the bytes are received where they are kept (not copied);
	// only a last block shorter than a whole one goes through a pool
	// block. next is the offset in img of the next block lent; spare
	// keeps the pool blocks standing for the lent ones.
	inPlace bool
	next    int64
	spare   chan []byte
	// copied counts the bytes copied into img (Options.copied; may be
	// nil).
	copied *atomic.Int64
	// chk, when not nil, checks the bytes written instead of h (a file
	// checked by its format, [FileInfo.Format]).
	chk Checker
	// besideWrite checks (hashes) each block beside its write, on a
	// second goroutine, rather than after it.
	besideWrite bool
	// hashed counts the bytes hashed (Options.hashed; may be nil).
	hashed *atomic.Int64
}

// createSink creates r for a stream of size bytes in blocks of bs; with
// piece > 0 the sink drops behind in pieces of that size.
func createSink(r Ref, bs int, size int64, pool *Buffers, piece int64) (*sink, error) {
	if err := vfd.MkdirDurable(r.Driver, path.Dir(r.Path)); err != nil {
		return nil, err
	}
	f, err := vfd.CreateTrunc(r.Driver, r.Path)
	if err != nil {
		return nil, err
	}
	s := &sink{pool: pool, f: f, path: r.Path, work: make(chan []byte, 2), free: make(chan []byte, 3), done: make(chan struct{}), h: b3.New(), piece: piece}
	for range max(1, min(3, (size+int64(bs)-1)/int64(bs))) {
		s.free <- pool.get(bs)
	}
	go s.run()
	return s, nil
}

func (s *sink) run() {
	defer close(s.done)
	var checkIn chan []byte
	var checked chan struct{}
	defer func() { // before s.done: the checker ends first
		if checkIn != nil {
			close(checkIn)
		}
	}()
	for b := range s.work {
		// The fields set after createSink are seen from the first block.
		if s.besideWrite && checkIn == nil {
			checkIn, checked = make(chan []byte), make(chan struct{})
			go func() {
				for b := range checkIn {
					s.check(b)
					checked <- struct{}{}
				}
			}()
		}
		if s.err == nil {
			if checkIn != nil {
				checkIn <- b // read by both goroutines, written by neither
			}
			if _, err := s.f.WriteAt(b, s.off); err != nil {
				s.err = vfd.WrapPathAt(err, "write", s.path, s.off)
			}
			// (Past the image's end nothing is copied: the file then
			// has another size, and its image is not used.)
			if s.img != nil && !s.lent(b) && s.off+int64(len(b)) <= int64(len(s.img)) {
				copy(s.img[s.off:], b)
				if s.copied != nil {
					s.copied.Add(int64(len(b)))
				}
			}
			if checkIn != nil {
				<-checked
			} else {
				s.check(b)
			}
			s.off += int64(len(b))
			s.dropBehind()
		}
		s.release(b)
	}
}

// check shows b to the sink's checker, or hashes it.
func (s *sink) check(b []byte) {
	if s.chk != nil {
		_, _ = s.chk.Write(b) // Close reports it
		return
	}
	s.h.Write(b)
	if s.hashed != nil {
		s.hashed.Add(int64(len(b)))
	}
}

// lent reports whether b is a block of img that buffer lent (it ends
// where img does: a pool block never shares img's memory).
func (s *sink) lent(b []byte) bool {
	return s.inPlace && cap(b) > 0 && len(s.img) > 0 && &b[:cap(b)][cap(b)-1] == &s.img[len(s.img)-1]
}

// receiveInPlace makes buffer lend the blocks of img (see sink.inPlace).
// img is cut to its length: a lent block is known by its capacity ending
// where img's bytes end ([sink.lent]), so capacity beyond them would make
// a lent block pass for a pool block, recycled while it is the image.
func (s *sink) receiveInPlace(img []byte) {
	s.img, s.inPlace = img[:len(img):len(img)], true
	s.spare = make(chan []byte, cap(s.free))
}

// dropBehind starts the writeback of every whole piece written since the
// last call and drops the pieces dropWindow pieces behind it. Both are
// hints: a write error they meet comes back from the final Sync.
func (s *sink) dropBehind() {
	if s.piece <= 0 {
		return
	}
	for s.off-s.hinted >= s.piece {
		_ = vfd.StartWriteback(s.f, s.hinted, s.piece)
		s.hinted += s.piece
		if !s.noDrop && s.hinted-s.dropped > s.behind() {
			_ = vfd.DropCache(s.f, s.dropped, s.piece)
			s.dropped += s.piece
		}
	}
}

// behind is how far behind the write the sink drops pieces: window
// pieces, dropWindow when window is 0.
func (s *sink) behind() int64 {
	if s.window > 0 {
		return s.window * s.piece
	}
	return dropWindow * s.piece
}

// buffer returns the block the next bytes are received into: a pool
// block, or with inPlace the next whole block of img.
func (s *sink) buffer() []byte {
	b := <-s.free
	if s.inPlace && s.next+int64(len(b)) <= int64(len(s.img)) {
		s.spare <- b
		l := s.img[s.next:]
		s.next += int64(len(b))
		return l[:len(b)]
	}
	return b
}

func (s *sink) put(b []byte) { s.work <- b }

// release takes back a block buffer returned, written or not.
func (s *sink) release(b []byte) {
	if s.lent(b) {
		s.free <- <-s.spare
		return
	}
	s.free <- b[:cap(b)]
}

// finish waits for the writes, syncs and closes the file, and returns the
// hash and size of what was written.
func (s *sink) finish() (encode.Hash, int64, error) {
	_, h, size, err := s.finishWith(nil)
	return h, size, err
}

// verdict returns the outcome of the sink's format check (nil without
// one), once finished.
func (s *sink) verdict() error {
	if s.chk == nil {
		return nil
	}
	return s.chk.Close()
}

// finishWith waits for the writes. If tail is not nil, it then appends
// the bytes tail returns for the hash of what was written so far. It
// syncs and closes the file. It returns the hash before the tail, the
// hash of the whole file and its size.
func (s *sink) finishWith(tail func(body encode.Hash) ([]byte, error)) (body, whole encode.Hash, size int64, err error) {
	close(s.work)
	<-s.done
	for len(s.free) > 0 {
		s.pool.put(<-s.free)
	}
	err = s.err
	copy(body[:], s.h.Sum(nil))
	if err == nil && tail != nil {
		var b []byte
		if b, err = tail(body); err == nil {
			if _, err = s.f.WriteAt(b, s.off); err == nil {
				s.h.Write(b)
				s.off += int64(len(b))
			}
		}
	}
	if err == nil {
		err = s.f.Sync()
	}
	if err == nil && s.piece > 0 && !s.noDrop {
		_ = vfd.DropCache(s.f, 0, 0) // synced: nothing left to wait for
	}
	err = errors.Join(err, s.f.Close())
	copy(whole[:], s.h.Sum(nil))
	return body, whole, s.off, err
}

// abandon closes and removes a sink after a failure.
func (s *sink) abandon(d vfd.Driver) {
	_, _, _ = s.finish()
	_ = d.Remove(s.path)
}
