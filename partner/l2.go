package partner

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/encode"
)

// Copy is the partner copy a rank received and holds.
type Copy struct {
	// Of is the rank whose data file was copied (the left neighbour).
	Of   int
	Size int64
	Hash encode.Hash
	// Sent is the hash of this rank's own file as it was sent (zero when
	// the sender did not hash: Options.SkipSourceHash with a known hash).
	// With own.HashUnknown it is the hash to record for own.
	Sent encode.Hash
}

// CopyToPartner is L2's transfer. Collective over the world c (every rank
// calls it at the same time): each rank streams own (its synced data file,
// with its recorded size and hash) to its right neighbour in the group ring
// and receives its left neighbour's file into copyTo (a tmp name; the file
// is written, synced and hash-checked), in blocks of o.BlockSize with
// Sendrecv, holding a few blocks at most. The hash of own is checked as it
// is read; a mismatch on either side is an error on that rank, and the
// receiver removes a copy that fails its check. With own.HashUnknown the
// hash is computed as own is read (returned in Copy.Sent) and the receiver
// checks the copy against it. A local failure never stops the exchange, so
// every rank returns.
func CopyToPartner(c comm.Comm, t *Topology, o Options, own FileInfo, copyTo Ref) (Copy, error) {
	me := c.Rank()
	right, left := t.Right(me), t.Left(me)
	o.log().Debug("partner copy", zap.Int("rank", me), zap.Int("right", right), zap.Int("left", left), zap.Int64("size", own.Size))
	size, h, sent, err := stream(c, right, left, tagCopy, o, streamEnd{out: &own, in: &copyTo, inOwner: left, learn: true})
	if err != nil {
		return Copy{}, fmt.Errorf("partner copy (rank %d -> %d, from %d): %w", me, right, left, err)
	}
	return Copy{Of: left, Size: size, Hash: h, Sent: sent}, nil
}

// L2Recovery says what [RecoverPartner] did on one rank.
type L2Recovery struct {
	// OwnRebuilt is set when this rank's data file was restored from the
	// copy held by its right neighbour.
	OwnRebuilt bool
	// OwnImage holds the restored data file's bytes, checked against the
	// recorded hash, when Options.ImageLimit allowed it.
	OwnImage []byte
	// HeldRebuilt is set when the copy this rank holds of its left
	// neighbour's data was re-sent.
	HeldRebuilt bool
}

var errNotListed = fmt.Errorf("%w: file not listed", ErrBadArgument)

const (
	flagOwnOK  = 1
	flagHeldOK = 2
)

// RecoverPartner is L2's recovery. Collective over the world c. own is
// this rank's data file and held the copy this rank keeps of its left
// neighbour's data file, each with the size and hash recorded at
// checkpoint time. Every rank checks both, the flags travel around the
// ring, and missing or corrupted originals are restored from their copies
// and missing copies re-sent from their originals, each written under a tmp
// name, synced, hash-checked and renamed into place. A rank whose file and
// copy are both gone gets an error wrapping [ErrUnrecoverable] naming the
// rank; its neighbours report it too. Good files are never modified.
func RecoverPartner(c comm.Comm, t *Topology, o Options, own, held FileInfo) (L2Recovery, error) {
	me := c.Rank()
	right, left := t.Right(me), t.Left(me)
	bs := o.block()
	log := o.log()
	var flags byte
	ownErr := errNotListed
	if own.Valid() {
		ownErr = own.check(me, bs)
	}
	if ownErr == nil {
		flags |= flagOwnOK
	}
	heldErr := errNotListed
	if held.Valid() {
		heldErr = held.Check(left, bs)
	}
	if heldErr == nil {
		flags |= flagHeldOK
	}
	// learn the right neighbour's flags (is my copy there?) and the left's (is its original there?)
	fromRight := make([]byte, 1)
	if _, err := c.Sendrecv([]byte{flags}, left, tagFlags, fromRight, right, tagFlags); err != nil {
		return L2Recovery{}, fmt.Errorf("exchange flags: %w", err)
	}
	fromLeft := make([]byte, 1)
	if _, err := c.Sendrecv([]byte{flags}, right, tagFlags+1, fromLeft, left, tagFlags+1); err != nil {
		return L2Recovery{}, fmt.Errorf("exchange flags: %w", err)
	}
	rightHeld := fromRight[0]&flagHeldOK != 0
	leftOwn := fromLeft[0]&flagOwnOK != 0

	var errs []error
	needOwn := ownErr != nil && own.Valid()
	needHeld := heldErr != nil && held.Valid()
	if ownErr != nil && (!rightHeld || !own.Valid()) {
		errs = append(errs, fmt.Errorf("%w: rank %d: its data file and its partner copy on rank %d (node %d) are both lost: %w",
			ErrUnrecoverable, me, right, t.NodeOf(right), ownErr))
		needOwn = false
	}
	if heldErr != nil && (!leftOwn || !held.Valid()) {
		errs = append(errs, fmt.Errorf("%w: rank %d: its data file and its partner copy on rank %d (node %d) are both lost: %w",
			ErrUnrecoverable, left, me, t.NodeOf(me), heldErr))
		needHeld = false
	}
	var res L2Recovery
	// Every file sent below was hashed by Check a moment ago, so the
	// senders do not hash it again; each receiver still checks what it
	// wrote against the recorded hash.
	o.SkipSourceHash = true
	// Phase 1: right neighbours send back the copies they hold (ring leftwards).
	{
		e := streamEnd{inOwner: me, keep: true} // the restart reads a restored data file next
		leftNeedsOwn := fromLeft[0]&flagOwnOK == 0 && flags&flagHeldOK != 0
		if leftNeedsOwn {
			h := held
			e.out = &h
		}
		tmp := Ref{Driver: own.Driver, Path: own.Path + TmpSuffix}
		var img []byte
		if needOwn {
			e.in, e.inSize, e.inHash = &tmp, own.Size, own.Hash
			if o.ImageLimit > 0 && own.Size <= o.ImageLimit {
				// The restart reads the bytes from memory: the file
				// need not stay in the page cache.
				e.image, e.keep = &img, false
			}
		}
		if _, _, _, err := stream(c, left, right, tagRestoreOwn, o, e); err != nil {
			errs = append(errs, fmt.Errorf("restore data of rank %d from rank %d: %w", me, right, err))
		} else if needOwn {
			if err := publish(own.Driver, tmp.Path, own.Path); err != nil {
				errs = append(errs, fmt.Errorf("publish restored %s: %w", own.Path, err))
			} else {
				res.OwnRebuilt, res.OwnImage = true, img
				log.Info("restored data file from partner copy", zap.Int("rank", me), zap.Int("from", right))
			}
		}
	}
	// Phase 2: originals are re-sent to partners whose copy is lost (ring rightwards).
	{
		e := streamEnd{inOwner: left}
		rightNeedsHeld := !rightHeld && flags&flagOwnOK != 0
		if rightNeedsHeld {
			o := own
			e.out = &o
		}
		tmp := Ref{Driver: held.Driver, Path: held.Path + TmpSuffix}
		if needHeld {
			e.in, e.inSize, e.inHash = &tmp, held.Size, held.Hash
		}
		if _, _, _, err := stream(c, right, left, tagRestoreHeld, o, e); err != nil {
			errs = append(errs, fmt.Errorf("re-send data of rank %d to rank %d: %w", left, me, err))
		} else if needHeld {
			if err := publish(held.Driver, tmp.Path, held.Path); err != nil {
				errs = append(errs, fmt.Errorf("publish re-sent copy %s: %w", held.Path, err))
			} else {
				res.HeldRebuilt = true
				log.Info("re-sent partner copy", zap.Int("rank", me), zap.Int("of", left))
			}
		}
	}
	return res, errors.Join(errs...)
}
