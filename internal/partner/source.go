package partner

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// source streams a file in blocks with a read-ahead goroutine and hashes it.
type source struct {
	pool  *Buffers
	f     vfd.File
	size  int64
	bs    int
	ready chan []byte
	free  chan []byte
	done  chan struct{}
	h     *b3.Hasher
	tap   io.Writer // FileInfo.Tap
	err   error     // set by the reader goroutine before closing ready
	// hashed counts the bytes hashed (Options.hashed; may be nil).
	hashed *atomic.Int64
	// img, when inPlace, is the file's image, lent block by block as it
	// is (no reader goroutine, no copy); off is the next block's offset.
	img     []byte
	inPlace bool
	off     int64
	// copied counts the bytes read from an image into blocks
	// (Options.copied; nil unless the file has one).
	copied *atomic.Int64
	// load, when not nil, is where the file is read, block by block
	// (the blocks sent are slices of it, never pooled).
	load []byte
}

func openSource(fi FileInfo, bs int, hash bool, pool *Buffers, hashed *atomic.Int64) (*source, error) {
	return openSourceFrom(fi, bs, hash, pool, hashed, nil, false, nil)
}

// openSourceFrom is openSource with more choices. With inPlace, a file
// with an image that is neither hashed nor tapped is sent from its image
// as it is. next then returns slices of the image, which the caller only
// reads. There is no reader goroutine and no copy. Otherwise copied (may
// be nil) counts the bytes copied from an image into blocks. With load
// (fi.Size bytes) the file is read into load, block by block, and sent
// from there.
func openSourceFrom(fi FileInfo, bs int, hash bool, pool *Buffers, hashed, copied *atomic.Int64, inPlace bool, load []byte) (*source, error) {
	if inPlace && fi.Image != nil && !hash && fi.Tap == nil {
		if int64(len(fi.Image)) != fi.Size {
			return nil, fmt.Errorf("%w: %s has %d bytes, want %d", ErrHashMismatch, fi.Path, len(fi.Image), fi.Size)
		}
		s := &source{pool: pool, f: vfd.BytesFile(fi.Path, fi.Image), size: fi.Size, bs: bs,
			ready: make(chan []byte), free: make(chan []byte), done: make(chan struct{}), img: fi.Image, inPlace: true}
		close(s.ready)
		return s, nil
	}
	f, err := fi.open()
	if err != nil {
		return nil, err
	}
	size, err := f.Size()
	if err == nil && size != fi.Size {
		err = fmt.Errorf("%w: %s has %d bytes, want %d", ErrHashMismatch, fi.Path, size, fi.Size)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &source{pool: pool, f: f, size: size, bs: bs, ready: make(chan []byte, 2), free: make(chan []byte, 3), done: make(chan struct{}), tap: fi.Tap, hashed: hashed}
	if fi.Image != nil {
		s.copied = copied
	}
	if hash {
		s.h = b3.New()
	}
	if load != nil && int64(len(load)) == size {
		// Read ahead a few blocks more: they cost no memory.
		s.load, s.ready = load, make(chan []byte, 4)
	} else {
		for range min(3, (size+int64(bs)-1)/int64(bs)) {
			s.free <- pool.get(bs)
		}
	}
	go s.run()
	return s, nil
}

func (s *source) run() {
	defer close(s.ready)
	for off := int64(0); off < s.size; off += int64(s.bs) {
		var buf []byte
		if s.load != nil {
			select {
			case <-s.done:
				return
			default:
			}
			buf = s.load[off:]
		} else {
			select {
			case buf = <-s.free:
			case <-s.done:
				return
			}
		}
		n := int(min(int64(s.bs), s.size-off))
		if err := vfd.ReadFull(s.f, buf[:n], off); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			s.err = vfd.WrapPathAt(err, "read", s.f.Name(), off)
			return
		}
		if s.copied != nil {
			s.copied.Add(int64(n))
		}
		s.digest(buf[:n])
		select {
		case s.ready <- buf[:n]:
		case <-s.done:
			return
		}
	}
}

// digest hashes b and shows it to the tap, both at once when there are
// both (two passes over b on two cores).
func (s *source) digest(b []byte) {
	if s.h != nil && s.hashed != nil {
		s.hashed.Add(int64(len(b)))
	}
	switch {
	case s.h != nil && s.tap != nil:
		tapped := make(chan struct{})
		go func() {
			_, _ = s.tap.Write(b)
			close(tapped)
		}()
		s.h.Write(b)
		<-tapped
	case s.h != nil:
		s.h.Write(b)
	case s.tap != nil:
		_, _ = s.tap.Write(b)
	}
}

// next returns the next block, or nil at the end or after an error.
func (s *source) next() []byte {
	if s.inPlace {
		if s.off >= s.size {
			return nil
		}
		end := min(s.off+int64(s.bs), s.size)
		b := s.img[s.off:end:end]
		s.off = end
		return b
	}
	b, ok := <-s.ready
	if !ok {
		return nil
	}
	return b
}

func (s *source) release(b []byte) {
	if !s.inPlace && s.load == nil {
		s.free <- b[:cap(b)]
	}
}

// close stops the reader and returns its error and the hash of all bytes
// read (false when it did not hash).
func (s *source) close() (encode.Hash, bool, error) {
	close(s.done)
	for b := range s.ready {
		if s.load == nil {
			s.pool.put(b)
		}
	}
	for len(s.free) > 0 {
		s.pool.put(<-s.free)
	}
	var h encode.Hash
	if s.h != nil {
		copy(h[:], s.h.Sum(nil))
	}
	return h, s.h != nil, errors.Join(s.err, s.f.Close())
}
