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

// Flags of a rank in the rounds of [RecoverPartner].
const (
	flagOwnOK  = 1 // its data file is sound (restored, in the second round)
	flagHeldOK = 2 // first round: the copy it holds is there, of its size; second: it checked out
	// flagOwnListed: it has a data file to restore (first round).
	flagOwnListed = 4
	// flagHeldSent: it sent its copy in phase 1, which the receiver
	// checked (second round).
	flagHeldSent = 8
	// flagCopyBad: the copy sent to it in phase 1 failed its check
	// (second round).
	flagCopyBad = 16
)

// exchangeFlags sends flags to both ring neighbours and returns theirs.
func exchangeFlags(c comm.Comm, left, right, tag int, flags byte) (fromLeft, fromRight byte, err error) {
	r := make([]byte, 1)
	if _, err := c.Sendrecv([]byte{flags}, left, tag, r, right, tag); err != nil {
		return 0, 0, fmt.Errorf("exchange flags: %w", err)
	}
	l := make([]byte, 1)
	if _, err := c.Sendrecv([]byte{flags}, right, tag+1, l, left, tag+1); err != nil {
		return 0, 0, fmt.Errorf("exchange flags: %w", err)
	}
	return l[0], r[0], nil
}

// RecoverPartner is L2's recovery. Collective over the world c. own is
// this rank's data file and held the copy this rank keeps of its left
// neighbour's data file, each with the size and hash recorded at
// checkpoint time. Missing or corrupted originals are restored from
// their copies and missing or corrupted copies re-sent from their
// originals, each written under a tmp name, synced, hash-checked and
// renamed into place. A rank whose file and copy are both gone gets an
// error wrapping [ErrUnrecoverable] naming the rank; its neighbours
// report it too. Good files are never modified.
//
// Each byte is read once and hashed once: every rank checks its data
// file (or takes the caller's check, [FileInfo.Checked]) and tells its
// neighbours whether it is sound and whether the copy it holds is there;
// a copy that restores its left neighbour's data file (phase 1) is
// checked by the receiver as it arrives, not beforehand, while every
// other copy is checked beside phase 1; a second round of flags then
// says which copies are bad, and their originals are re-sent (phase 2).
func RecoverPartner(c comm.Comm, t *Topology, o Options, own, held FileInfo) (L2Recovery, error) {
	me := c.Rank()
	right, left := t.Right(me), t.Left(me)
	bs := o.block()
	log := o.log()
	ownErr := errNotListed
	if own.Valid() {
		ownErr = own.check(me, bs)
	}
	heldThere := held.Valid() && (!held.Checked || held.CheckErr == nil) && held.present()
	var flags byte
	if ownErr == nil {
		flags |= flagOwnOK
	}
	if heldThere {
		flags |= flagHeldOK
	}
	if own.Valid() {
		flags |= flagOwnListed
	}
	fromLeft, fromRight, err := exchangeFlags(c, left, right, tagFlags, flags)
	if err != nil {
		return L2Recovery{}, err
	}
	// sendHeld: the left neighbour's data file is to be restored from the
	// copy this rank holds, which the receiver checks as it arrives.
	sendHeld := heldThere && fromLeft&flagOwnOK == 0 && fromLeft&flagOwnListed != 0

	var errs []error
	needOwn := ownErr != nil && own.Valid()
	if ownErr != nil && (fromRight&flagHeldOK == 0 || !own.Valid()) {
		errs = append(errs, fmt.Errorf("%w: rank %d: its data file and its partner copy on rank %d (node %d) are both lost: %w",
			ErrUnrecoverable, me, right, t.NodeOf(right), ownErr))
		needOwn = false
	}
	// Every copy phase 1 does not send is checked beside it.
	var heldDone chan error
	heldErr := errNotListed
	if held.Valid() && !sendHeld {
		heldDone = make(chan error, 1)
		go func() { heldDone <- held.check(left, bs) }()
	}
	var res L2Recovery
	// The files sent below were either checked a moment ago (the data
	// files) or are checked by their receiver against the recorded hash
	// (the copies), so the senders do not hash them.
	o.SkipSourceHash = true
	copyBad := false
	// Phase 1: right neighbours send back the copies they hold (ring leftwards).
	{
		e := streamEnd{inOwner: me, keep: true} // the restart reads a restored data file next
		if sendHeld {
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
			if needOwn && errors.Is(err, ErrHashMismatch) {
				copyBad = true
				errs = append(errs, fmt.Errorf("%w: rank %d: its data file and its partner copy on rank %d (node %d) are both lost: %w",
					ErrUnrecoverable, me, right, t.NodeOf(right), errors.Join(ownErr, err)))
			} else if needOwn || !sendHeld {
				errs = append(errs, fmt.Errorf("restore data of rank %d from rank %d: %w", me, right, err))
			} else {
				errs = append(errs, fmt.Errorf("send the copy of rank %d's data back to it: %w", left, err))
			}
		} else if needOwn {
			if err := publish(own.Driver, tmp.Path, own.Path); err != nil {
				errs = append(errs, fmt.Errorf("publish restored %s: %w", own.Path, err))
			} else {
				res.OwnRebuilt, res.OwnImage = true, img
				log.Info("restored data file from partner copy", zap.Int("rank", me), zap.Int("from", right))
			}
		}
	}
	if heldDone != nil {
		heldErr = <-heldDone
	}
	var flags2 byte
	ownOK := ownErr == nil || res.OwnRebuilt
	if ownOK {
		flags2 |= flagOwnOK
	}
	if sendHeld {
		flags2 |= flagHeldSent
	} else if heldErr == nil {
		flags2 |= flagHeldOK
	}
	if copyBad {
		flags2 |= flagCopyBad
	}
	fromLeft, fromRight, err = exchangeFlags(c, left, right, tagFlags+2, flags2)
	if err != nil {
		return L2Recovery{}, errors.Join(append(errs, err)...)
	}
	leftOwn := fromLeft&flagOwnOK != 0
	// A copy sent in phase 1 is sound when it restored the data file.
	rightHeld := fromRight&flagHeldOK != 0 || (fromRight&flagHeldSent != 0 && res.OwnRebuilt)
	if sendHeld {
		heldErr = nil
		if fromLeft&flagCopyBad != 0 {
			heldErr = &CorruptionError{Path: held.Path, Rank: left, Err: fmt.Errorf("%w: rank %d found it bad as it restored its data from it", ErrHashMismatch, left)}
		}
	}
	needHeld := heldErr != nil && held.Valid()
	if heldErr != nil && (!leftOwn || !held.Valid()) {
		errs = append(errs, fmt.Errorf("%w: rank %d: its data file and its partner copy on rank %d (node %d) are both lost: %w",
			ErrUnrecoverable, left, me, t.NodeOf(me), heldErr))
		needHeld = false
	}
	// Phase 2: originals are re-sent to partners whose copy is lost (ring rightwards).
	{
		e := streamEnd{inOwner: left}
		if !rightHeld && ownOK {
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
