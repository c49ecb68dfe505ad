package partner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// DefaultBlockSize is the transfer block size when Options.BlockSize is 0.
const DefaultBlockSize = 1 << 20

// TmpSuffix is appended to a rebuilt file's name while it is written; it is
// renamed into place once synced and verified.
//
// wire format: never change — it equals levels.TmpSuffix, which the
// checkpoint runtime removes at start-up.
const TmpSuffix = ".tmp"

// Message tags used by the transfers, all in one range.
// A stream uses its tag for blocks, tag+1 for the header, tag+2 for
// the trailer and tag+3 for the preamble.
const (
	tagCopy        = 0x6600
	tagRestoreOwn  = 0x6610
	tagRestoreHeld = 0x6620
	tagFlags       = 0x6630
)

// Options tune the transfers.
type Options struct {
	// BlockSize is the message size in bytes (FTI's block_size); 0 means
	// DefaultBlockSize.
	BlockSize int
	// Logger receives debug lines; nil means none.
	Logger *zap.Logger
	// Buffers, when not nil, recycles the transfer blocks between calls.
	Buffers *Buffers
	// SkipSourceHash drops the sender's own BLAKE3 pass over the file it
	// sends. The receiver still hashes what it wrote and compares it with
	// the sender's recorded hash, which catches a damaged source as well,
	// only one step later; this saves a hash pass on CPU-starved nodes.
	SkipSourceHash bool
	// KeepCache leaves the partner copies, parity files and re-sent
	// copies a transfer writes in the page cache. By default the writer
	// starts the writeback of every 16 MiB it wrote and drops each piece
	// from the cache once two more follow it ([vfd.DropCache]), and drops
	// the rest after the final sync: nobody reads these files unless a
	// node is lost, and a writer that reuses its own pages costs a
	// fraction of the kernel time of one that takes fresh memory for
	// every byte (see docs/performance.md). A data file restored from its
	// copy is always kept: the restart reads it next.
	KeepCache bool
	// Format checks the files a receiver learns from their sender
	// ([CopyToPartner]) when the sender says their hash is a digest of
	// the format's ([FileInfo.Format]) rather than their BLAKE3; nil
	// means such a file is refused. The files this rank sends or expects
	// name their format themselves.
	Format Format
	// ImageLimit, when positive, makes [RecoverPartner] and
	// [RebuildGroup] keep the bytes of a data file they restore of at most
	// this size in memory ([L2Recovery.OwnImage], [L3Recovery.DataImage]),
	// verified, for the restart to read.
	ImageLimit int64

	// dropPiece is the piece of dropping behind (0: dropPiece), for tests.
	dropPiece int64
	// hashed, when not nil, counts the bytes the transfers hash with
	// BLAKE3 themselves (senders and receivers), for tests.
	hashed *atomic.Int64
	// imageCopied, when not nil, counts the bytes an L3 rebuild copies
	// into the image of the data file it rebuilds, for tests.
	imageCopied *atomic.Int64
	// copied, when not nil, counts the bytes the transfers copy between
	// an image and their blocks (a sender reading its image into a
	// block, a receiver copying a block into the image it keeps), for
	// tests.
	copied *atomic.Int64
}

// dropPiece is the piece after which a sink that drops behind starts the
// writeback of what it wrote (as the FTI-FF writer does); dropWindow is
// how far behind the write it drops pieces from the page cache, in
// pieces. A sink holds at most (dropWindow+1) pieces of its file in the
// page cache, 48 MiB.
const (
	dropPiece  = 16 << 20
	dropWindow = 2
)

func (o Options) piece() int64 {
	if o.dropPiece > 0 {
		return o.dropPiece
	}
	return dropPiece
}

func (o Options) block() int {
	if o.BlockSize <= 0 {
		return DefaultBlockSize
	}
	return o.BlockSize
}

func (o Options) log() *zap.Logger {
	if o.Logger == nil {
		return zap.NewNop()
	}
	return o.Logger
}

// Ref names a file through a driver.
type Ref struct {
	Driver vfd.Driver
	Path   string
}

// FileInfo is a file with its expected size and BLAKE3-256 hash.
type FileInfo struct {
	Ref
	Size int64
	Hash encode.Hash
	// HashUnknown says Hash is not known yet: a checkpoint transfer
	// ([CopyToPartner], [EncodeGroup]) then computes it from the bytes it
	// reads and returns it, so that the caller can record it, and the
	// receivers check what they got against that hash instead. It saves
	// the caller a pass over a file the transfer reads anyway.
	HashUnknown bool
	// Checked says the caller has already checked the file against Size
	// and Hash (with [FileInfo.CheckImage]), CheckErr being the outcome: a
	// recovery ([RecoverPartner], [RebuildGroup]) then does not read the
	// file again to check it.
	Checked  bool
	CheckErr error
	// Image, when not nil, holds the file's bytes, verified: a recovery
	// that sends the file reads them from memory.
	Image []byte
	// Tap, when not nil, is shown every byte of the file, in order, as a
	// checkpoint transfer ([CopyToPartner], [EncodeGroup]) reads it to
	// send or encode it, so that the caller can check the file in the
	// transfer's own read pass (levels verifies an FTI-FF file this way
	// when it raises a checkpoint). The transfer ignores the tap's errors:
	// the caller asks the tap for its verdict afterwards. A tap that did
	// not see the whole file saw a transfer that failed.
	Tap io.Writer
	// Format, when not nil, says Hash is not the BLAKE3 of the file's
	// bytes but the format's digest of the file (levels: the FTI-FF file
	// checksum): the file is checked by the format ([FileInfo.Check]),
	// and a transfer sends the format's preamble of it ahead of its bytes
	// so that the receiver checks them against it as they arrive, and
	// does not hash the file otherwise. HashUnknown does not apply.
	Format Format
	// Preamble, when not nil, is the preamble of the file the caller has
	// read already (else a transfer asks Format for it).
	Preamble []byte
}

// Valid reports whether the ref names a file.
func (r Ref) Valid() bool { return r.Driver != nil && r.Path != "" }

// checkPiece is the smallest read of a check: large reads, read ahead
// while the previous piece is hashed, keep a device busy.
const checkPiece = 4 << 20

// present reports whether f names a regular file of its recorded size
// (without reading it).
func (f FileInfo) present() bool {
	if !f.Valid() {
		return false
	}
	file, err := f.Driver.Open(f.Path, vfd.ReadOnly)
	if err != nil {
		return false
	}
	size, err := file.Size()
	return errors.Join(err, file.Close()) == nil && size == f.Size
}

// Check verifies that f exists with its size and hash. The error is a
// *CorruptionError naming the path and rank.
func (f FileInfo) Check(rank int, blockSize int) error {
	if f.Format != nil {
		_, err := f.Format.Check(f, rank, false)
		return err
	}
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: f.Path, Rank: rank, Offset: off, Err: err}
	}
	file, err := f.Driver.Open(f.Path, vfd.ReadOnly)
	if err != nil {
		return cerr(0, err)
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return cerr(0, err)
	}
	if size != f.Size {
		return cerr(size, fmt.Errorf("%w: %d bytes, want %d", ErrHashMismatch, size, f.Size))
	}
	h, err := encode.HashReader(file, size, max(blockSize, checkPiece))
	if err != nil {
		return cerr(0, err)
	}
	if h != f.Hash {
		return cerr(0, fmt.Errorf("%w: BLAKE3 %x, want %x", ErrHashMismatch, h[:8], f.Hash[:8]))
	}
	return nil
}

// CheckImage checks f as [FileInfo.Check] does (the same errors) while
// reading its bytes into memory, each read from storage once, and
// returns them.
func (f FileInfo) CheckImage(rank int, blockSize int) ([]byte, error) {
	if f.Format != nil {
		return f.Format.Check(f, rank, true)
	}
	cerr := func(off int64, err error) error {
		return &CorruptionError{Path: f.Path, Rank: rank, Offset: off, Err: err}
	}
	file, err := f.Driver.Open(f.Path, vfd.ReadOnly)
	if err != nil {
		return nil, cerr(0, err)
	}
	size, err := file.Size()
	if err == nil && size != f.Size {
		err = cerr(size, fmt.Errorf("%w: %d bytes, want %d", ErrHashMismatch, size, f.Size))
	} else if err != nil {
		err = cerr(0, err)
	}
	if err != nil {
		return nil, errors.Join(err, file.Close())
	}
	piece := int64(max(blockSize, 4<<20))
	l := vfd.LoadAligned(file, size, int(piece), 0, imageAlign)
	h := b3.New()
	for off := int64(0); off < size && err == nil; off += piece {
		var b []byte
		if b, err = l.Range(off, min(off+piece, size)); err == nil {
			h.Write(b)
		}
	}
	var img []byte
	if err == nil {
		img, err = l.Bytes()
	}
	err = errors.Join(err, l.Close())
	if err != nil {
		return nil, cerr(0, err)
	}
	if got := encode.Hash(h.Sum(nil)); got != f.Hash {
		return nil, cerr(0, fmt.Errorf("%w: BLAKE3 %x, want %x", ErrHashMismatch, got[:8], f.Hash[:8]))
	}
	return img, nil
}

// check returns the outcome of the caller's check when there was one
// (Checked), else checks f.
func (f FileInfo) check(rank int, blockSize int) error {
	if f.Checked {
		return f.CheckErr
	}
	return f.Check(rank, blockSize)
}

// open opens f for reading: its verified image when it has one.
func (f FileInfo) open() (vfd.File, error) {
	if f.Image != nil {
		return vfd.BytesFile(f.Path, f.Image), nil
	}
	return f.Driver.Open(f.Path, vfd.ReadOnly)
}

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

// openSourceFrom is openSource; with inPlace, a file with an image that
// is neither hashed nor tapped is sent from its image as it is: next
// returns slices of the image (which the caller only reads), with no
// reader goroutine and no copy. copied (may be nil) counts the bytes
// copied from an image into blocks otherwise. With load (fi.Size bytes)
// the file is read into load, block by block, and sent from there.
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
			s.err = fmt.Errorf("read %s at %d: %w", s.f.Name(), off, err)
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
	if err := mkdirDurable(r.Driver, path.Dir(r.Path)); err != nil {
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
				s.err = fmt.Errorf("write %s at %d: %w", s.path, s.off, err)
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

// finishWith waits for the writes, then, if tail is not nil, appends the
// bytes tail returns for the hash of what was written so far; it syncs
// and closes the file and returns the hash before the tail, the hash of
// the whole file and its size.
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

// mkdirDurable creates dir if needed and syncs it and its parent, so a
// directory re-created on a replacement node survives a crash.
func mkdirDurable(d vfd.Driver, dir string) error {
	if _, err := d.Stat(dir); err == nil {
		return nil
	}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return errors.Join(d.SyncDir(dir), d.SyncDir(path.Dir(dir)))
}

// publish renames tmp into place and syncs the directory.
func publish(d vfd.Driver, tmp, final string) error {
	if err := d.Rename(tmp, final); err != nil {
		return err
	}
	return d.SyncDir(path.Dir(final))
}

// trailer ends every stream: whether the sender's bytes matched their
// expected hash (or were not hashed), the size sent and the hash of the
// bytes sent (zero when not hashed).
type trailer struct {
	ok     bool
	hashed bool
	size   int64
	hash   encode.Hash
}

const trailerLen = 1 + 8 + 32

func (t trailer) marshal() []byte {
	b := make([]byte, trailerLen)
	if t.ok {
		b[0] |= 1
	}
	if t.hashed {
		b[0] |= 2
	}
	binary.LittleEndian.PutUint64(b[1:], uint64(t.size))
	copy(b[9:], t.hash[:])
	return b
}

func parseTrailer(b []byte) (trailer, bool) {
	if len(b) != trailerLen {
		return trailer{}, false
	}
	var t trailer
	t.ok = b[0]&1 != 0
	t.hashed = b[0]&2 != 0
	t.size = int64(binary.LittleEndian.Uint64(b[1:]))
	copy(t.hash[:], b[9:])
	return t, true
}

// stream moves one file per rank around a ring: this rank sends out (if not
// nil) to dst and receives from src into in (if not nil), block by block with
// Sendrecv. Every rank of c must call stream with the same tags; the number
// of rounds is agreed with one AllreduceInt64. Local failures do not stop
// the exchange (the rank keeps sending empty blocks so that no peer waits
// forever); they are returned at the end. The returned hash and size are
// those of the received file when in is not nil.
type streamEnd struct {
	out     *FileInfo // file to send, expected size and hash
	in      *Ref      // where to write the received file (a tmp name)
	inSize  int64     // expected size of the received file
	inHash  encode.Hash
	inOwner int  // rank whose data is received, for errors
	learn   bool // take inSize and inHash from the sender's header
	// inHashUnknown is learnt from a sender that does not know its hash:
	// the received bytes are checked against the hash in its trailer.
	inHashUnknown bool
	// keep leaves the received file in the page cache whatever
	// Options.KeepCache says (a restored data file, read next); its
	// writeback is still started piece by piece unless KeepCache.
	keep bool
	// image, when not nil, receives a copy of the received file's bytes
	// once they check out against the expected hash (nil otherwise).
	image *[]byte
	// optional, when not nil, lets the sender offer nothing: the
	// receiver then writes nothing, reports no error and sets
	// *optional to true.
	optional *bool
	// inFormat, when not nil, checks the received file (its hash is the
	// format's digest, [FileInfo.Format]); a receiver that learns takes
	// learnFormat when the sender says the file is formatted.
	inFormat, learnFormat Format
	// outPreamble is the preamble sent ahead of a formatted file;
	// preambleLen the length of the one announced to this rank.
	outPreamble []byte
	preambleLen int64
	// sentFormatted: the sender says its file is checked by its format
	// (it sends a preamble).
	sentFormatted bool
	// refusal, on a sender that has a file to send but cannot (its
	// preamble does not read), says why: it goes in place of the
	// preamble, under a header flagged headerRefused (and
	// headerDamaged when the file is damaged), so that the receiver
	// reports the sender's reason. peerRefused holds the flags of
	// such a header received.
	refusal     []byte
	damaged     bool
	peerRefused byte
	// checkOut makes the sender hash out (a file with no format) and
	// compare it with its hash whatever Options.SkipSourceHash says:
	// the file is checked as it is sent, not before.
	checkOut bool
	// outVerdict, when not nil, is the verdict of out's check as it was
	// sent (its tap's), asked once every byte was read: a failure makes
	// the trailer say the bytes were not sound.
	outVerdict func() error
	// loadInto, when not nil, is where out's bytes are read (len
	// out.Size): the sender keeps them, and sends them from there.
	loadInto []byte
	// sentErr is why out was not sent (set by the stream).
	sentErr error
}

// errNotOffered: the sender of an optional stream offered no file.
var errNotOffered = errors.New("partner: no file offered")

// headerLen is the length of a stream header: size u64, hash, flags,
// preamble length u64.
const headerLen = 8 + 32 + 1 + 8

// Header flags.
const (
	// headerHashUnknown: the sender hashes the file as it sends it and
	// puts the hash in its trailer.
	headerHashUnknown = 1
	// headerFormatted: the hash is the digest of the file's format; the
	// preamble that follows the header checks the bytes.
	headerFormatted = 2
	// headerRefused: the sender sends no file; what follows in place
	// of the preamble is its reason, with headerDamaged when its file
	// is damaged or gone.
	headerRefused = 4
	headerDamaged = 8
)

// maxRefusal bounds the reason a sender gives for sending nothing.
const maxRefusal = 4096

// maxPreambleOver bounds a preamble: at most this much more than the
// file it describes.
const maxPreambleOver = 1 << 20

// header opens every stream: the size and expected hash of the file sent.
func exchangeHeader(c comm.Comm, dst, src, tag int, e *streamEnd) error {
	var send []byte
	if e.out != nil {
		send = make([]byte, headerLen)
		binary.LittleEndian.PutUint64(send, uint64(e.out.Size))
		copy(send[8:], e.out.Hash[:])
		if e.out.HashUnknown {
			send[40] |= headerHashUnknown
		}
		if e.out.Format != nil {
			send[40] |= headerFormatted
		}
		binary.LittleEndian.PutUint64(send[41:], uint64(len(e.outPreamble)))
	} else if e.refusal != nil {
		send = make([]byte, headerLen)
		send[40] = headerRefused
		if e.damaged {
			send[40] |= headerDamaged
		}
		binary.LittleEndian.PutUint64(send[41:], uint64(len(e.refusal)))
	}
	recv := make([]byte, headerLen)
	n, err := c.Sendrecv(send, dst, tag, recv, src, tag)
	if err != nil {
		return fmt.Errorf("exchange header: %w", err)
	}
	if n == headerLen {
		// The preamble round takes place whatever this rank makes of it.
		e.preambleLen = int64(binary.LittleEndian.Uint64(recv[41:]))
		if size := int64(binary.LittleEndian.Uint64(recv)); e.preambleLen < 0 || e.preambleLen > max(size, 0)+maxPreambleOver {
			e.preambleLen = 0 // the round then fails with ErrTruncated, on this rank only
		}
	}
	if e.in == nil {
		return nil
	}
	if n != headerLen {
		if e.optional != nil && n == 0 {
			*e.optional = true
			return errNotOffered
		}
		return fmt.Errorf("%w: rank %d sent no file header", ErrBadArgument, src)
	}
	if recv[40]&headerRefused != 0 {
		if e.optional != nil {
			*e.optional = true
			return errNotOffered
		}
		e.peerRefused = recv[40] // its reason follows, in place of the preamble
		return nil
	}
	size := int64(binary.LittleEndian.Uint64(recv))
	h := encode.Hash(recv[8:40])
	formatted := recv[40]&headerFormatted != 0
	e.sentFormatted = formatted
	if e.learn {
		e.inSize, e.inHash, e.inHashUnknown = size, h, recv[40]&headerHashUnknown != 0
		if formatted {
			e.inFormat = e.learnFormat
			if e.inFormat == nil {
				return &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Err: fmt.Errorf("%w: rank %d sends a file checked by its format, and no format is set", ErrHashMismatch, src)}
			}
		}
		return nil
	}
	// A sender whose entry records another kind of hash than this
	// rank's (a manifest mixing FTI-FF checksums and BLAKE3 digests)
	// offers a hash this rank cannot compare: the bytes are checked
	// against this rank's own entry once received.
	sameKind := formatted == (e.inFormat != nil)
	if size != e.inSize || (sameKind && h != e.inHash) {
		return &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Err: fmt.Errorf("%w: rank %d offers %d bytes with another hash than expected (%d bytes)", ErrHashMismatch, src, size, e.inSize)}
	}
	return nil
}

// exchangePreamble sends the preamble of the file this rank sends (none
// when it is not checked by its format) and receives the one announced
// in the header it received; a receiver of a formatted file builds its
// checker from it.
func exchangePreamble(c comm.Comm, dst, src, tag int, e *streamEnd) (Checker, error) {
	recv := make([]byte, e.preambleLen)
	n, err := c.Sendrecv(e.outPreamble, dst, tag, recv, src, tag)
	if err != nil {
		return nil, fmt.Errorf("exchange preamble: %w", err)
	}
	if e.in != nil && e.peerRefused != 0 {
		why := fmt.Errorf("rank %d sends nothing: %s", src, recv[:n])
		if e.peerRefused&headerDamaged != 0 {
			return nil, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Err: fmt.Errorf("%w: %w", ErrHashMismatch, why)}
		}
		return nil, fmt.Errorf("%w: %w", ErrBadArgument, why)
	}
	if e.in == nil || e.inFormat == nil || !e.sentFormatted {
		return nil, nil
	}
	return e.inFormat.NewChecker(recv[:n], e.in.Path, e.inOwner, e.inSize, e.inHash)
}

// streamResult is what [stream] received and sent: the received file's
// size and hash, and whether that hash is the digest of its format
// (formatted), and the hash of the file sent (zero when not hashed).
type streamResult struct {
	size      int64
	hash      encode.Hash
	formatted bool
	sent      encode.Hash
	// sentErr says why the file sent was not sound (it did not read,
	// or failed its hash or [streamEnd.outVerdict]); nil when it was,
	// or when nothing was sent. sentOK says it was sent whole and
	// sound (its trailer said so).
	sentErr error
	sentOK  bool
}

func stream(c comm.Comm, dst, src, tag int, o Options, e streamEnd) (streamResult, error) {
	return streamDeferred(c, dst, src, tag, o, e)()
}

// streamDeferred is [stream] up to the last exchange with the peers: the
// receiver's end of the received file (its final writes, fsync and
// checks against the sender's trailer, which talk to no peer) is left to
// the returned wait, which the caller may run beside its next transfers
// (one goroutine, not the one talking to c). wait returns what stream
// returns and must be called once.
func streamDeferred(c comm.Comm, dst, src, tag int, o Options, e streamEnd) (wait func() (streamResult, error)) {
	x := &xfer{c: c, dst: dst, src: src, tag: tag, o: o, e: e}
	if !x.open() {
		return x.failed
	}
	rounds, err := c.AllreduceInt64(x.mine(), comm.Max)
	if err != nil {
		x.abort()
		return failedWith(fmt.Errorf("agree on rounds: %w", err))
	}
	for i := int64(0); i < rounds; i++ {
		if !x.round(i) {
			return x.failed
		}
	}
	return x.end()
}

// streamTwoWay runs two streams at once, block by block in the same
// rounds (a's block, then b's, in each), so that a rank that receives
// (or sends) two files has both under way together, from the one
// goroutine that talks to c: a's and b's tags must differ. Every rank
// of c must call it with the same tags. It returns the waits of a and
// b as [streamDeferred] does.
func streamTwoWay(c comm.Comm, o Options, a, b twoWayEnd) (waitA, waitB func() (streamResult, error)) {
	xa := &xfer{c: c, dst: a.dst, src: a.src, tag: a.tag, o: o, e: a.e}
	xb := &xfer{c: c, dst: b.dst, src: b.src, tag: b.tag, o: o, e: b.e}
	if !xa.open() {
		return xa.failed, xa.failed
	}
	if !xb.open() {
		xa.abort()
		return xb.failed, xb.failed
	}
	rounds, err := c.AllreduceInt64(max(xa.mine(), xb.mine()), comm.Max)
	if err != nil {
		xa.abort()
		xb.abort()
		f := failedWith(fmt.Errorf("agree on rounds: %w", err))
		return f, f
	}
	for i := int64(0); i < rounds; i++ {
		if !xa.round(i) {
			xb.abort()
			return xa.failed, xa.failed
		}
		if !xb.round(i) {
			xa.abort()
			return xb.failed, xb.failed
		}
	}
	waitA = xa.end()
	waitB = xb.end()
	return waitA, waitB
}

// twoWayEnd is one of the streams of [streamTwoWay]: this rank's end e
// of a stream sending to dst and receiving from src under tag.
type twoWayEnd struct {
	dst, src, tag int
	e             streamEnd
}

// failedWith returns a wait that returns err.
func failedWith(err error) func() (streamResult, error) {
	return func() (streamResult, error) { return streamResult{}, err }
}

// xfer is one stream under way on this rank (see [streamDeferred]):
// open exchanges its header and preamble and opens its file ends, round
// moves one block, end exchanges the trailers.
type xfer struct {
	c             comm.Comm
	dst, src, tag int
	o             Options
	e             streamEnd
	bs            int
	errs          []error
	out           *source
	outSize       int64
	in            *sink
	scratch       []byte // for blocks nobody keeps, allocated on first use
	recvOff       int64
	inBad         bool
	// fatal is set when the world broke: nothing more is exchanged.
	fatal error
}

// failed is the wait of a stream the world broke under.
func (x *xfer) failed() (streamResult, error) { return streamResult{}, x.fatal }

// abort closes the stream's file ends after a broken world elsewhere.
func (x *xfer) abort() {
	if x.out != nil {
		x.out.close()
		x.out = nil
	}
	if x.in != nil {
		x.in.abandon(x.e.in.Driver)
		x.in = nil
	}
}

// open exchanges the header and preamble and opens the source and sink;
// false when the world broke (x.fatal).
func (x *xfer) open() bool {
	c, dst, src, tag, o := x.c, x.dst, x.src, x.tag, x.o
	e := &x.e
	x.bs = o.block() // every rank must use the same block size: never capped per rank
	bs := x.bs
	if e.out != nil && e.out.Format != nil {
		p := e.out.Preamble
		var err error
		if p == nil {
			p, err = e.out.Format.Preamble(*e.out, c.Rank())
		}
		if err == nil && e.out.HashUnknown {
			err = fmt.Errorf("%w: a file checked by its format with no hash", ErrBadArgument)
		}
		if err != nil {
			// Nothing is offered: the receiver gets the reason and
			// reports it.
			err = fmt.Errorf("read the preamble of %s: %w", e.out.Path, err)
			x.errs = append(x.errs, err)
			x.e.sentErr = err
			why := []byte(err.Error())
			e.out, p = nil, why[:min(len(why), maxRefusal)]
			e.refusal, e.damaged = p, errors.Is(err, ErrHashMismatch) || errors.Is(err, fs.ErrNotExist)
		}
		e.outPreamble = p
	}
	if e.learn {
		e.learnFormat = o.Format
	}
	herr := exchangeHeader(c, dst, src, tag+1, e)
	var chk Checker
	if errors.Is(herr, comm.ErrAborted) {
		x.fatal = herr
		return false
	}
	if herr == nil {
		chk, herr = exchangePreamble(c, dst, src, tag+3, e)
	} else if _, err := exchangePreamble(c, dst, src, tag+3, e); err != nil {
		herr = errors.Join(herr, err)
	}
	if herr != nil {
		if errors.Is(herr, comm.ErrAborted) {
			x.fatal = herr
			return false
		}
		if !errors.Is(herr, errNotOffered) {
			x.errs = append(x.errs, herr)
		}
		if e.in != nil {
			// still take part in the exchange, but discard what arrives
			e.in = nil
		}
	}
	if e.out != nil {
		x.outSize = e.out.Size
		hash := (!o.SkipSourceHash || e.out.HashUnknown || e.checkOut) && e.out.Format == nil
		s, err := openSourceFrom(*e.out, bs, hash, o.Buffers, o.hashed, o.copied, true, e.loadInto)
		if err != nil {
			err = fmt.Errorf("open %s for sending: %w", e.out.Path, err)
			x.errs = append(x.errs, err)
			x.e.sentErr = err
		} else {
			x.out = s
		}
	}
	if e.in != nil {
		var piece int64
		if !o.KeepCache {
			// A file kept for the restart to read next still has
			// its writeback started as it arrives, so that its
			// final fsync does not write it all.
			piece = o.piece()
		}
		s, err := createSink(*e.in, bs, e.inSize, o.Buffers, piece)
		if err != nil {
			x.errs = append(x.errs, fmt.Errorf("create %s: %w", e.in.Path, err))
		} else {
			x.in = s
			s.noDrop = e.keep
			if e.image != nil {
				// Received in place, placed as a restart hands its
				// pages over to the variables (see imageAlign).
				s.receiveInPlace(vfd.AlignedBytes(e.inSize, imageAlign))
			}
			s.copied = o.copied
			s.besideWrite = true
			if chk != nil {
				s.chk = chk
			}
			s.hashed = o.hashed
		}
	}
	return true
}

// mine is the number of blocks this rank's end of the stream needs.
func (x *xfer) mine() int64 {
	blocks := func(n int64) int64 { return (n + int64(x.bs) - 1) / int64(x.bs) }
	m := blocks(x.outSize)
	if x.e.in != nil {
		m = max(m, blocks(x.e.inSize))
	}
	return m
}

// round exchanges block i; false when the world broke (x.fatal, the
// file ends closed).
func (x *xfer) round(i int64) bool {
	in, out, e, bs := x.in, x.out, &x.e, x.bs
	var send []byte
	if out != nil {
		send = out.next()
	}
	var recv []byte
	if in != nil && !x.inBad {
		recv = in.buffer()
	} else {
		if x.scratch == nil {
			x.scratch = make([]byte, bs)
		}
		recv = x.scratch
	}
	n, err := x.c.Sendrecv(send, x.dst, x.tag, recv, x.src, x.tag)
	if out != nil && send != nil {
		out.release(send)
	}
	if err != nil {
		// the world is broken: nothing more can be exchanged
		if in != nil && !x.inBad {
			in.release(recv)
		}
		x.errs = append(x.errs, fmt.Errorf("exchange block %d: %w", i, err))
		x.abort()
		x.fatal = errors.Join(x.errs...)
		return false
	}
	if in != nil && !x.inBad {
		want := min(int64(bs), max(e.inSize-x.recvOff, 0))
		if int64(n) != want {
			x.inBad = true
			in.release(recv)
			x.errs = append(x.errs, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Offset: x.recvOff,
				Err: fmt.Errorf("%w: received a %d-byte block from rank %d, want %d", ErrHashMismatch, n, x.src, want)})
		} else if n > 0 {
			in.put(recv[:n])
		} else {
			in.release(recv)
		}
		x.recvOff += int64(n)
	}
	return true
}

// end exchanges the trailers and returns the wait of the received
// file's end.
func (x *xfer) end() func() (streamResult, error) {
	var res streamResult
	var rt receivedTrailer
	errs := x.errs
	res.sent, rt, errs, res.sentErr = exchangeTrailers(x.c, x.dst, x.src, x.tag, x.e, x.out, x.outSize, errs)
	res.sentOK = x.out != nil && res.sentErr == nil
	if res.sentErr == nil {
		res.sentErr = x.e.sentErr
	}
	e, in, inBad, src := x.e, x.in, x.inBad, x.src
	return func() (streamResult, error) {
		res.size, res.hash, errs = finishReceived(src, e, in, inBad, rt, errs)
		res.formatted = in != nil && in.chk != nil
		return res, errors.Join(errs...)
	}
}

// receivedTrailer is the trailer a stream received (n bytes of b), or
// the error of the exchange.
type receivedTrailer struct {
	b   []byte
	n   int
	err error
}

// exchangeTrailers ends a stream's exchanges: it closes the source out
// and sends its trailer (size, hash, whether the bytes were sound) and
// receives the sender's ([finishReceived] checks the received file
// against it). It returns the hash of what was sent, the trailer
// received, errs with what it found appended, and why the file sent was
// not sound (read, hash or [streamEnd.outVerdict]; nil when it was).
func exchangeTrailers(c comm.Comm, dst, src, tag int, e streamEnd, out *source, outSize int64, errs []error) (
	sentHash encode.Hash, _ receivedTrailer, _ []error, sentErr error) {
	var t trailer
	if out != nil {
		h, hashed, err := out.close()
		known := hashed && !e.out.HashUnknown
		sentHash = h
		if err != nil {
			sentErr = err
		} else if known && h != e.out.Hash {
			sentErr = &CorruptionError{Path: e.out.Path, Rank: c.Rank(), Err: fmt.Errorf("%w: before sending", ErrHashMismatch)}
		} else if e.outVerdict != nil {
			if verr := e.outVerdict(); verr != nil {
				sentErr = &CorruptionError{Path: e.out.Path, Rank: c.Rank(), Err: fmt.Errorf("%w: as it was sent: %w", ErrHashMismatch, verr)}
			}
		}
		t = trailer{ok: sentErr == nil, hashed: hashed, size: outSize, hash: h}
		if sentErr != nil {
			errs = append(errs, sentErr)
		}
	}
	var sendT []byte
	if e.out != nil {
		sendT = t.marshal()
	}
	tb := make([]byte, trailerLen)
	n, err := c.Sendrecv(sendT, dst, tag+2, tb, src, tag+2)
	if err != nil {
		errs = append(errs, fmt.Errorf("exchange trailer: %w", err))
	}
	return sentHash, receivedTrailer{b: tb, n: n, err: err}, errs, sentErr
}

// finishReceived waits for the writes of the received file in (if any),
// syncs it and checks it against the sender's trailer rt, removing the
// file when anything went wrong. It returns the received file's size and
// hash, and errs with what it found appended.
func finishReceived(src int, e streamEnd, in *sink, inBad bool, got receivedTrailer, errs []error) (recvSize int64, recvHash encode.Hash, _ []error) {
	tb, n, err := got.b, got.n, got.err
	if in != nil {
		h, size, ferr := in.finish()
		rt, ok := parseTrailer(tb[:n])
		switch {
		case ferr != nil:
			errs = append(errs, ferr)
		case err != nil || inBad:
		case !ok || !rt.ok:
			errs = append(errs, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Err: fmt.Errorf("%w: sender rank %d reported a bad source", ErrHashMismatch, src)})
		case in.chk != nil:
			// Checked by its format as it arrived: its digest is the
			// one expected.
			h = e.inHash
			if verr := in.verdict(); verr != nil {
				errs = append(errs, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Err: fmt.Errorf("%w: after receiving: %w", ErrHashMismatch, verr)})
			} else if size != e.inSize {
				errs = append(errs, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Offset: size, Err: fmt.Errorf("%w: received %d bytes, want %d", ErrHashMismatch, size, e.inSize)})
			}
		case e.inFormat != nil:
			// Sent without a preamble (the sender's entry records the
			// BLAKE3 of its bytes): checked by its format now, from
			// memory when the bytes were kept.
			f := FileInfo{Ref: *e.in, Size: e.inSize, Hash: e.inHash, Format: e.inFormat}
			if in.img != nil && int64(len(in.img)) == size {
				f.Image = in.img
			}
			h = e.inHash
			if size != e.inSize {
				errs = append(errs, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Offset: size, Err: fmt.Errorf("%w: received %d bytes, want %d", ErrHashMismatch, size, e.inSize)})
			} else if _, cerr := e.inFormat.Check(f, e.inOwner, false); cerr != nil {
				errs = append(errs, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Err: fmt.Errorf("%w: after receiving: %w", ErrHashMismatch, cerr)})
			}
		case e.inHashUnknown && !rt.hashed:
			errs = append(errs, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Err: fmt.Errorf("%w: sender rank %d sent no hash", ErrHashMismatch, src)})
		case size != e.inSize || (!e.inHashUnknown && h != e.inHash) || (rt.hashed && rt.hash != h):
			errs = append(errs, &CorruptionError{Path: e.in.Path, Rank: e.inOwner, Offset: size, Err: fmt.Errorf("%w: after receiving", ErrHashMismatch)})
		}
		if len(errs) > 0 {
			_ = e.in.Driver.Remove(e.in.Path)
		} else if e.image != nil && in.img != nil && int64(len(in.img)) == size {
			*e.image = in.img
		}
		recvSize, recvHash = size, h
	}
	return recvSize, recvHash, errs
}
