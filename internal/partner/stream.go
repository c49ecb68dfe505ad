package partner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

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

// streamEnd is one rank's end of a [stream]: what it sends and receives.
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
	// refusal says why a sender that has a file to send cannot send it
	// (its preamble does not read). It goes in place of the preamble,
	// under a header flagged headerRefused. The header also has
	// headerDamaged when the file is damaged. So the receiver reports
	// the sender's reason. peerRefused holds the flags of such a header
	// received.
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
var errNotOffered = errors.New("no file offered")

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

// stream moves one file per rank around a ring, block by block with Sendrecv.
// This rank sends e.out (when not nil) to dst.
// It receives from src into e.in (when not nil).
// Every rank of c calls it with the same tags.
// One AllreduceInt64 agrees on the number of rounds.
// A local failure does not stop the exchange: the rank sends empty blocks.
// So no peer waits forever; the errors are returned at the end.
// The result's size and hash are those of the received file.
func stream(c comm.Comm, dst, src, tag int, o Options, e streamEnd) (streamResult, error) {
	return streamDeferred(c, dst, src, tag, o, e)()
}

// streamDeferred is [stream] up to the last exchange with the peers.
// The receiver's end of the received file is left to the returned wait.
// That is its final writes, fsync and checks against the sender's
// trailer, which talk to no peer. The caller may run wait beside its
// next transfers, on one goroutine other than the one talking to c.
// wait returns what stream returns and must be called once.
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
// rounds: a's block, then b's, in each. So a rank that receives (or
// sends) two files has both under way together. They run from the one
// goroutine that talks to c, so a's and b's tags must differ. Every rank
// of c must call it with the same tags. It returns the waits of a and b
// as [streamDeferred] does.
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
			err = vfd.WrapPath(err, "read the preamble of", e.out.Path)
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
			err = vfd.WrapPath(err, "open for sending", e.out.Path)
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
			x.errs = append(x.errs, vfd.WrapPath(err, "create", e.in.Path))
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
