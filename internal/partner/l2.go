package partner

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
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
	// Formatted says Hash is the digest of the copy's format, checked by
	// [Options.Format] as the copy arrived, not its BLAKE3: the sender's
	// file had a [FileInfo.Format].
	Formatted bool
}

// CopyToPartner is L2's transfer. Collective over the world c (every rank
// calls it at the same time): each rank streams own (its synced data file,
// with its recorded size and hash) to its right neighbour in the group ring
// and receives its left neighbour's file into copyTo (the name the caller chose; the file
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
	r, err := stream(c, right, left, tagCopy, o, streamEnd{out: &own, in: &copyTo, inOwner: left, learn: true})
	if err != nil {
		return Copy{}, fmt.Errorf("partner copy (rank %d -> %d, from %d): %w", me, right, left, err)
	}
	return Copy{Of: left, Size: r.size, Hash: r.hash, Sent: r.sent, Formatted: r.formatted}, nil
}

// L2Recovery says what [RecoverPartner] did on one rank.
type L2Recovery struct {
	// OwnRebuilt is set when this rank's data file was restored from the
	// copy held by its right neighbour.
	OwnRebuilt bool
	// OwnImage holds the data file's bytes, checked against the recorded
	// hash (as RecoverPartner read them, or as they were restored), when
	// Options.ImageLimit allowed it and the caller did not check the file
	// itself ([FileInfo.Checked]).
	OwnImage []byte
	// HeldRebuilt is set when the copy this rank holds of its left
	// neighbour's data was re-sent.
	HeldRebuilt bool
}

var errNotListed = fmt.Errorf("%w: file not listed", ErrBadArgument)

// Flags of a rank in the two rounds of [RecoverPartner].
const (
	// flagOwnOK: its data file is there, of its size (first round); it
	// checked out or was restored (second round).
	flagOwnOK = 1
	// flagHeldOK: the copy it holds is there, of its size (first round);
	// it checked out or was re-sent (second round).
	flagHeldOK = 2
	// flagOwnListed: it has a data file to restore.
	flagOwnListed = 4
	// flagHeldSent: it sent its copy to restore its left neighbour's data
	// file, which checked it as it arrived (second round).
	flagHeldSent = 8
	// flagCopyBad: the copy sent to it to restore its data file failed
	// its check (second round).
	flagCopyBad = 16
	// flagHeldListed: it holds a copy to check or re-send.
	flagHeldListed = 32
	// flagOwnLate: its data file was there but failed its check; it is
	// restored in phase 3 (second round).
	flagOwnLate = 64
)

// Tags of the second restore of data files and re-send of copies.
const (
	tagRestoreOwnLate  = tagRestoreOwn + 4
	tagRestoreHeldLate = tagRestoreHeld + 4
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

// checkResult is the outcome of a background check.
type checkResult struct {
	img []byte
	err error
}

// startCheck checks f in the background (into memory when image is
// set), or returns the caller's outcome ([FileInfo.Checked]).
func startCheck(f FileInfo, rank, bs int, image bool) func() checkResult {
	if f.Checked {
		return func() checkResult { return checkResult{f.Image, f.CheckErr} }
	}
	done := make(chan checkResult, 1)
	go func() {
		var r checkResult
		if image {
			r.img, r.err = f.CheckImage(rank, bs)
		} else {
			r.err = f.Check(rank, bs)
		}
		done <- r
	}()
	var r checkResult
	got := false
	return func() checkResult {
		if !got {
			r, got = <-done, true
		}
		return r
	}
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
// Each byte is read once and hashed once on each rank that uses it, and
// the transfers start at once: every rank tells its neighbours which of
// its two files are there (of their size); then, in one two-way
// transfer, a missing data file is restored from its copy (ring
// leftwards), which the receiver checks as it arrives, while a missing
// copy is re-sent from its original (ring rightwards), which the sender
// checks as it reads it to send it (unless the caller checked it
// already: [FileInfo.Checked]; the sender's trailer says whether it
// checked out) and the receiver checks again as it arrives. Every file
// present and not sent is checked in the background. A data file read
// into memory under Options.ImageLimit, by its check, as it is sent or
// as it is restored, is returned checked in [L2Recovery.OwnImage]. The
// fsync, checks and publication of a restored data file run beside the
// rest (they talk to no peer). A second round of flags then says which
// files failed their checks, and those are restored or re-sent, one
// direction after the other.
func RecoverPartner(c comm.Comm, t *Topology, o Options, own, held FileInfo) (L2Recovery, error) {
	me := c.Rank()
	right, left := t.Right(me), t.Left(me)
	bs := o.block()
	log := o.log()
	var res L2Recovery
	var errs []error
	image := o.ImageLimit > 0 && own.Size <= o.ImageLimit

	// Round 1: which files are there.
	ownThere := own.Valid() && (!own.Checked || own.CheckErr == nil) && (own.Checked || own.present())
	heldThere := held.Valid() && (!held.Checked || held.CheckErr == nil) && (held.Checked || held.present())
	flags := flagsOf(ownThere, held.Valid(), own.Valid())
	if heldThere {
		flags |= flagHeldOK
	}
	fromLeft, fromRight, err := exchangeFlags(c, left, right, tagFlags, flags)
	if err != nil {
		return L2Recovery{}, err
	}
	// sendOwn: the right neighbour lost the copy of this rank's data
	// file, which is re-sent from it. A data file not checked yet is
	// checked as it is read to be sent (one read, two consumers), and
	// the sender's trailer says whether it checked out.
	sendOwn := fromRight&flagHeldOK == 0 && fromRight&flagHeldListed != 0 && ownThere
	checkAsSent := sendOwn && !own.Checked
	var ownCheck func() checkResult
	if ownThere && !checkAsSent {
		ownCheck = startCheck(own, me, bs, image)
	}
	// sendHeld: the left neighbour's data file is missing and is restored
	// from the copy this rank holds, which the receiver checks.
	sendHeld := heldThere && fromLeft&flagOwnOK == 0 && fromLeft&flagOwnListed != 0
	var heldCheck func() checkResult
	if heldThere && !sendHeld {
		heldCheck = startCheck(held, left, bs, false)
	}
	// missingErr is why a file that is not there (of its size) is bad:
	// the check fails at once, without reading.
	missingErr := func(f FileInfo, rank int) error {
		if !f.Valid() {
			return errNotListed
		}
		if f.Checked && f.CheckErr != nil {
			return f.CheckErr
		}
		if err := f.Check(rank, bs); err != nil {
			return err
		}
		return &CorruptionError{Path: f.Path, Rank: rank, Err: fmt.Errorf("%w: missing, or not of its recorded size %d, a moment ago", ErrHashMismatch, f.Size)}
	}
	bothLost := func(rank, holder int, err error) error {
		return fmt.Errorf("%w: rank %d: its data file and its partner copy on rank %d (node %d) are both lost: %w",
			ErrUnrecoverable, rank, holder, t.NodeOf(holder), err)
	}
	var ownErr error // set once this rank's data file is known bad and not restored
	if !ownThere {
		ownErr = missingErr(own, me)
	}
	// The files sent below were checked (the data files, from memory when
	// there is an image) or are checked by their receiver against the
	// recorded hash (the copies), so the senders do not hash them.
	o.SkipSourceHash = true
	// restoreOwn receives this rank's data file from its right
	// neighbour's copy (need) while sending its own copy to its left
	// neighbour (send). The restored file's fsync, checks and publication
	// talk to no peer: they run in the background, beside the next
	// transfer, until the returned join.
	copyBad := false
	restoreOwnEnd := func(need, send bool) (streamEnd, Ref, *[]byte) {
		e := streamEnd{inOwner: me, keep: true} // the restart reads a restored data file next
		if send {
			h := held
			e.out = &h
		}
		tmp := Ref{Driver: own.Driver, Path: own.Path + TmpSuffix}
		img := new([]byte)
		if need {
			e.in, e.inSize, e.inHash, e.inFormat = &tmp, own.Size, own.Hash, own.Format
			if image {
				// The restart reads the bytes from memory: the file
				// need not stay in the page cache.
				e.image, e.keep = img, false
			}
		}
		return e, tmp, img
	}
	restoreOwnJoin := func(wait func() (streamResult, error), need, send bool, tmp Ref, img *[]byte) (join func()) {
		type outcome struct{ err, pubErr error }
		done := make(chan outcome, 1)
		go func() {
			var oc outcome
			_, oc.err = wait()
			if oc.err == nil && need {
				oc.pubErr = publish(own.Driver, tmp.Path, own.Path)
			}
			done <- oc
		}()
		return func() {
			oc := <-done
			err := oc.err
			switch {
			case err != nil && need && errors.Is(err, ErrHashMismatch):
				copyBad = true
				errs = append(errs, bothLost(me, right, errors.Join(ownErr, err)))
			case err != nil && (need || !send):
				errs = append(errs, fmt.Errorf("restore data of rank %d from rank %d: %w", me, right, err))
			case err != nil:
				errs = append(errs, fmt.Errorf("send the copy of rank %d's data back to it: %w", left, err))
			case need:
				if oc.pubErr != nil {
					errs = append(errs, fmt.Errorf("publish restored %s: %w", own.Path, oc.pubErr))
				} else {
					res.OwnRebuilt, res.OwnImage, ownErr = true, *img, nil
					log.Info("restored data file from partner copy", zap.Int("rank", me), zap.Int("from", right))
				}
			}
		}
	}
	restoreOwn := func(tag int, need, send bool) (join func()) {
		e, tmp, img := restoreOwnEnd(need, send)
		return restoreOwnJoin(streamDeferred(c, left, right, tag, o, e), need, send, tmp, img)
	}
	// resendHeld sends this rank's data file to its right neighbour
	// (send: from its image when there is one) while receiving the copy
	// it holds from its left neighbour (need); a sender that turns out
	// to have nothing sound offers nothing (optional).
	resendHeldEnd := func(need, send bool, optional *bool) (streamEnd, Ref) {
		e := streamEnd{inOwner: left, optional: optional}
		if send {
			src := own
			if res.OwnImage != nil {
				src.Image = res.OwnImage
			}
			e.out = &src
		}
		tmp := Ref{Driver: held.Driver, Path: held.Path + TmpSuffix}
		if need {
			e.in, e.inSize, e.inHash, e.inFormat = &tmp, held.Size, held.Hash, held.Format
		}
		return e, tmp
	}
	resendHeldAfter := func(err error, need bool, optional *bool, tmp Ref) bool {
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("re-send data of rank %d to rank %d: %w", left, me, err))
		case need && (optional == nil || !*optional):
			if err := publish(held.Driver, tmp.Path, held.Path); err != nil {
				errs = append(errs, fmt.Errorf("publish re-sent copy %s: %w", held.Path, err))
			} else {
				res.HeldRebuilt = true
				log.Info("re-sent partner copy", zap.Int("rank", me), zap.Int("of", left))
				return true
			}
		}
		return false
	}
	resendHeld := func(tag int, need, send bool, optional *bool) bool {
		e, tmp := resendHeldEnd(need, send, optional)
		_, err := stream(c, right, left, tag, o, e)
		return resendHeldAfter(err, need, optional, tmp)
	}
	ownResult := func() {
		if ownCheck == nil {
			return
		}
		r := ownCheck()
		ownCheck = nil
		if r.err != nil {
			ownErr = r.err
		} else if image {
			res.OwnImage = r.img
		}
	}

	// Phases 1 and 2, in one two-way transfer: missing data files come
	// back from the copies their right neighbours hold (ring leftwards),
	// checked as they arrive, while missing copies are re-sent from their
	// originals (ring rightwards), checked as they are read to be sent
	// (or checked before, by the caller) and again as they arrive.
	needOwn := !ownThere && own.Valid()
	if !ownThere && (fromRight&flagHeldOK == 0 || !own.Valid()) {
		errs = append(errs, bothLost(me, right, ownErr))
		needOwn = false
	}
	if sendOwn && !checkAsSent {
		ownResult()
		sendOwn = ownErr == nil
	}
	needHeld := !heldThere && held.Valid() && fromLeft&flagOwnOK != 0
	notOffered := false
	eA, tmpA, imgA := restoreOwnEnd(needOwn, sendHeld)
	eB, tmpB := resendHeldEnd(needHeld, sendOwn, &notOffered)
	var sentImg []byte
	if checkAsSent {
		eB.checkOut = true // a file with no format: its hash
		if own.Format != nil {
			pre, err := own.Format.Preamble(own, me)
			var chk Checker
			if err == nil {
				chk, err = own.Format.NewChecker(pre, own.Path, me, own.Size, own.Hash)
			}
			if err != nil {
				ownErr = err // offers nothing: the preamble says why
			} else {
				eB.out.Preamble, eB.out.Tap, eB.outVerdict = pre, chk, chk.Close
			}
		}
		if image && ownErr == nil {
			sentImg = vfd.AlignedBytes(own.Size, imageAlign)
			eB.loadInto = sentImg
		}
	}
	waitA, waitB := streamTwoWay(c, o, twoWayEnd{dst: left, src: right, tag: tagRestoreOwn, e: eA},
		twoWayEnd{dst: right, src: left, tag: tagRestoreHeld, e: eB})
	joinOwn := restoreOwnJoin(waitA, needOwn, sendHeld, tmpA, imgA)
	sent, err := waitB()
	heldOK := resendHeldAfter(err, needHeld, &notOffered, tmpB)
	if checkAsSent && ownErr == nil {
		switch {
		case sent.sentErr != nil:
			ownErr = asCorruption(sent.sentErr, own.Path, me)
		case !sent.sentOK:
			ownErr = &CorruptionError{Path: own.Path, Rank: me, Err: fmt.Errorf("not checked: its transfer failed: %w", err)}
		case image:
			res.OwnImage = sentImg
		}
	}

	// Round 2: the outcome of every check and transfer.
	joinOwn()
	ownResult()
	var heldErr error
	switch {
	case heldOK, sendHeld:
	case heldCheck != nil:
		heldErr = heldCheck().err
	default:
		heldErr = missingErr(held, left)
	}
	lateOwn := ownThere && ownErr != nil // present, but failed its check
	flags2 := flagsOf(ownErr == nil, held.Valid(), own.Valid())
	if lateOwn {
		flags2 |= flagOwnLate
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
		return res, errors.Join(append(errs, err)...)
	}
	if sendHeld && fromLeft&flagCopyBad != 0 {
		heldErr = &CorruptionError{Path: held.Path, Rank: left, Err: fmt.Errorf("%w: rank %d found it bad as it restored its data from it", ErrHashMismatch, left)}
	}
	// Phase 3: a data file that was there but failed its check comes back
	// from its copy if that checked out (ring leftwards).
	if lateOwn && fromRight&flagHeldOK == 0 {
		errs = append(errs, bothLost(me, right, ownErr))
		lateOwn = false
	}
	restoreOwn(tagRestoreOwnLate, lateOwn, fromLeft&flagOwnLate != 0 && !sendHeld && heldErr == nil)()
	// Phase 4: a copy that failed its check, or was missing and not
	// re-sent, is re-sent from its original if that is sound (ring
	// rightwards). A data file restored in phase 3 came from the copy its
	// right neighbour holds, which is sound.
	lateHeld := heldErr != nil && held.Valid() && fromLeft&flagOwnOK != 0
	if heldErr != nil && (fromLeft&flagOwnOK == 0 || !held.Valid()) {
		errs = append(errs, bothLost(left, me, heldErr))
	}
	// As the right neighbour decides: with the flags of round 2.
	sendLate := flags2&flagOwnOK != 0 && fromRight&(flagHeldOK|flagHeldSent) == 0 && fromRight&flagHeldListed != 0
	resendHeld(tagRestoreHeldLate, lateHeld, sendLate, nil)
	return res, errors.Join(errs...)
}

// asCorruption returns err as a *CorruptionError naming path and rank.
func asCorruption(err error, path string, rank int) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		return err
	}
	return &CorruptionError{Path: path, Rank: rank, Err: err}
}

// flagsOf sets flagOwnOK, flagHeldListed and flagOwnListed.
func flagsOf(ownOK, heldListed, ownListed bool) byte {
	var f byte
	if ownOK {
		f |= flagOwnOK
	}
	if heldListed {
		f |= flagHeldListed
	}
	if ownListed {
		f |= flagOwnListed
	}
	return f
}
