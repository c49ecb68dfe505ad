package partner

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/vfd"
)

// RecoverPartner is L2's recovery. Collective over the world c.
// own is this rank's data file.
// held is the copy this rank keeps of its left neighbour's data file.
// Each comes with the size and hash recorded at checkpoint time.
// A missing or corrupted data file is restored from its copy.
// A missing or corrupted copy is re-sent from its original.
// Each is written under a tmp name, synced, hash-checked and renamed into place.
// A rank whose file and copy are both gone gets an error wrapping [ErrUnrecoverable].
// The error names the rank; its neighbours report it too.
// Good files are never modified.
//
// Each byte is read once and hashed once on each rank that uses it.
// Its phases are the methods of l2Recover:
//   - announce: every rank tells its neighbours which of its files are there, of their size.
//   - transfer: one two-way transfer restores missing data files and re-sends missing copies.
//     A data file comes back from its copy (ring leftwards); the receiver checks it as it arrives.
//     A copy is re-sent from its original (ring rightwards).
//     The sender checks the original as it reads it, unless the caller did ([FileInfo.Checked]).
//     The sender's trailer says whether it checked out; the receiver checks it again.
//     Every file present and not sent is checked in the background meanwhile.
//   - settle: a second round of flags says which files failed their checks.
//   - restoreLate and resendLate: those files are restored or re-sent, one direction after the other.
//
// A data file read into memory under Options.ImageLimit is returned checked in [L2Recovery.OwnImage].
// It may have been read by its check, as it was sent or as it was restored.
// The fsync, checks and publication of a restored data file run beside the rest.
// They talk to no peer.
func RecoverPartner(c comm.Comm, t *Topology, o Options, own, held FileInfo) (L2Recovery, error) {
	r := newL2Recover(c, t, o, own, held)
	if err := r.announce(); err != nil {
		return L2Recovery{}, err
	}
	r.transfer()
	if err := r.settle(); err != nil {
		return r.res, errors.Join(append(r.errs, err)...)
	}
	r.restoreLate()
	r.resendLate()
	return r.res, errors.Join(r.errs...)
}

// l2Recover is one rank's part of [RecoverPartner], one method per phase.
type l2Recover struct {
	c                   comm.Comm
	t                   *Topology
	o                   Options
	own, held           FileInfo
	me, left, right, bs int
	log                 *zap.Logger
	image               bool // own is kept in memory (Options.ImageLimit)
	res                 L2Recovery
	errs                []error

	// Set by announce.
	ownThere, heldThere bool // there, of their size
	fromLeft, fromRight byte // the neighbours' flags (of settle's round after it)
	// sendOwn: the right neighbour lost its copy of own, re-sent from own.
	// checkAsSent: own is checked as it is read to be sent (one read, two consumers).
	sendOwn, checkAsSent bool
	// sendHeld: the left neighbour's data file is restored from held.
	sendHeld            bool
	ownCheck, heldCheck func() checkResult // background checks
	ownErr              error              // own is known bad and not restored
	copyBad             bool               // the copy sent to restore own failed its check
	joinOwn             func()             // waits for own's restore (transfer)
	heldOK              bool               // held was re-sent (transfer)
	heldErr             error              // why held is bad (settle)
	lateOwn             bool               // own was there but failed its check (settle)
	flags2              byte               // this rank's flags of settle's round
}

func newL2Recover(c comm.Comm, t *Topology, o Options, own, held FileInfo) *l2Recover {
	me := c.Rank()
	return &l2Recover{c: c, t: t, o: o, own: own, held: held, me: me, left: t.Left(me), right: t.Right(me),
		bs: o.block(), log: o.log(), image: o.ImageLimit > 0 && own.Size <= o.ImageLimit}
}

// there reports whether f is there, of its size, as far as is known without reading it.
func there(f FileInfo) bool {
	return f.Valid() && (!f.Checked || f.CheckErr == nil) && (f.Checked || f.present())
}

// announce is round 1: which files are there.
// It starts the background checks of the files not sent.
func (r *l2Recover) announce() error {
	own, held := r.own, r.held
	r.ownThere, r.heldThere = there(own), there(held)
	flags := flagsOf(r.ownThere, held.Valid(), own.Valid())
	if r.heldThere {
		flags |= flagHeldOK
	}
	var err error
	r.fromLeft, r.fromRight, err = exchangeFlags(r.c, r.left, r.right, tagFlags, flags)
	if err != nil {
		return err
	}
	r.sendOwn = r.fromRight&flagHeldOK == 0 && r.fromRight&flagHeldListed != 0 && r.ownThere
	r.checkAsSent = r.sendOwn && !own.Checked
	if r.ownThere && !r.checkAsSent {
		r.ownCheck = startCheck(own, r.me, r.bs, r.image)
	}
	// The receiver checks a copy sent to restore its data file.
	r.sendHeld = r.heldThere && r.fromLeft&flagOwnOK == 0 && r.fromLeft&flagOwnListed != 0
	if r.heldThere && !r.sendHeld {
		r.heldCheck = startCheck(held, r.left, r.bs, false)
	}
	if !r.ownThere {
		r.ownErr = r.missingErr(own, r.me)
	}
	// The files sent are checked already (data files, from memory when there is an image).
	// Or their receiver checks them against the recorded hash (copies).
	// So the senders do not hash them.
	r.o.SkipSourceHash = true
	return nil
}

// missingErr is why a file that is not there (of its size) is bad.
// The check fails at once, without reading.
func (r *l2Recover) missingErr(f FileInfo, rank int) error {
	if !f.Valid() {
		return errNotListed
	}
	if f.Checked && f.CheckErr != nil {
		return f.CheckErr
	}
	if err := f.Check(rank, r.bs); err != nil {
		return err
	}
	return &CorruptionError{Path: f.Path, Rank: rank, Err: fmt.Errorf("%w: missing, or not of its recorded size %d, a moment ago", ErrHashMismatch, f.Size)}
}

// bothLost is the error of a rank whose data file and copy are both lost.
func (r *l2Recover) bothLost(rank, holder int, err error) error {
	return fmt.Errorf("%w: rank %d: its data file and its partner copy on rank %d (node %d) are both lost: %w",
		ErrUnrecoverable, rank, holder, r.t.NodeOf(holder), err)
}

// transfer is phases 1 and 2, in one two-way transfer.
// Missing data files come back from the copies their right neighbours hold (ring leftwards).
// They are checked as they arrive.
// Missing copies are re-sent from their originals (ring rightwards).
// Those are checked as they are read to be sent (or before, by the caller), and again as they arrive.
func (r *l2Recover) transfer() {
	needOwn := !r.ownThere && r.own.Valid()
	if !r.ownThere && (r.fromRight&flagHeldOK == 0 || !r.own.Valid()) {
		r.errs = append(r.errs, r.bothLost(r.me, r.right, r.ownErr))
		needOwn = false
	}
	if r.sendOwn && !r.checkAsSent {
		r.ownResult()
		r.sendOwn = r.ownErr == nil
	}
	needHeld := !r.heldThere && r.held.Valid() && r.fromLeft&flagOwnOK != 0
	notOffered := false
	eA, tmpA, imgA := r.restoreOwnEnd(needOwn, r.sendHeld)
	eB, tmpB := r.resendHeldEnd(needHeld, r.sendOwn, &notOffered)
	var sentImg []byte
	if r.checkAsSent {
		sentImg = r.checkOnSend(&eB)
	}
	waitA, waitB := streamTwoWay(r.c, r.o, twoWayEnd{dst: r.left, src: r.right, tag: tagRestoreOwn, e: eA},
		twoWayEnd{dst: r.right, src: r.left, tag: tagRestoreHeld, e: eB})
	r.joinOwn = r.restoreOwnJoin(waitA, needOwn, r.sendHeld, tmpA, imgA)
	sent, err := waitB()
	r.heldOK = r.resendHeldAfter(err, needHeld, &notOffered, tmpB)
	if r.checkAsSent && r.ownErr == nil {
		r.sentVerdict(sent, err, sentImg)
	}
}

// checkOnSend makes e check own as it sends it.
// A file with no format is checked by its hash; one with a format by its checker.
// It returns where own's bytes are read, when they are kept in memory.
func (r *l2Recover) checkOnSend(e *streamEnd) []byte {
	own := r.own
	e.checkOut = true
	if own.Format != nil {
		pre, err := own.Format.Preamble(own, r.me)
		var chk Checker
		if err == nil {
			chk, err = own.Format.NewChecker(pre, own.Path, r.me, own.Size, own.Hash)
		}
		if err != nil {
			r.ownErr = err // offers nothing: the preamble says why
		} else {
			e.out.Preamble, e.out.Tap, e.outVerdict = pre, chk, chk.Close
		}
	}
	if !r.image || r.ownErr != nil {
		return nil
	}
	img := vfd.AlignedBytes(own.Size, imageAlign)
	e.loadInto = img
	return img
}

// sentVerdict takes own's check as it was sent: its outcome, and its image.
// err is the outcome of that transfer.
func (r *l2Recover) sentVerdict(sent streamResult, err error, img []byte) {
	switch {
	case sent.sentErr != nil:
		r.ownErr = asCorruption(sent.sentErr, r.own.Path, r.me)
	case !sent.sentOK:
		r.ownErr = &CorruptionError{Path: r.own.Path, Rank: r.me, Err: fmt.Errorf("not checked: its transfer failed: %w", err)}
	case r.image:
		r.res.OwnImage = img
	}
}

// ownResult takes the outcome of own's background check, once.
func (r *l2Recover) ownResult() {
	if r.ownCheck == nil {
		return
	}
	res := r.ownCheck()
	r.ownCheck = nil
	if res.err != nil {
		r.ownErr = res.err
	} else if r.image {
		r.res.OwnImage = res.img
	}
}

// settle is round 2: the outcome of every check and transfer.
func (r *l2Recover) settle() error {
	r.joinOwn()
	r.ownResult()
	switch {
	case r.heldOK, r.sendHeld:
	case r.heldCheck != nil:
		r.heldErr = r.heldCheck().err
	default:
		r.heldErr = r.missingErr(r.held, r.left)
	}
	r.lateOwn = r.ownThere && r.ownErr != nil // present, but failed its check
	r.flags2 = flagsOf(r.ownErr == nil, r.held.Valid(), r.own.Valid())
	if r.lateOwn {
		r.flags2 |= flagOwnLate
	}
	if r.sendHeld {
		r.flags2 |= flagHeldSent
	} else if r.heldErr == nil {
		r.flags2 |= flagHeldOK
	}
	if r.copyBad {
		r.flags2 |= flagCopyBad
	}
	var err error
	r.fromLeft, r.fromRight, err = exchangeFlags(r.c, r.left, r.right, tagFlags+2, r.flags2)
	if err != nil {
		return err
	}
	if r.sendHeld && r.fromLeft&flagCopyBad != 0 {
		r.heldErr = &CorruptionError{Path: r.held.Path, Rank: r.left, Err: fmt.Errorf("%w: rank %d found it bad as it restored its data from it", ErrHashMismatch, r.left)}
	}
	return nil
}

// restoreLate is phase 3.
// A data file that was there but failed its check comes back from its copy (ring leftwards).
// That needs the copy to have checked out.
func (r *l2Recover) restoreLate() {
	if r.lateOwn && r.fromRight&flagHeldOK == 0 {
		r.errs = append(r.errs, r.bothLost(r.me, r.right, r.ownErr))
		r.lateOwn = false
	}
	send := r.fromLeft&flagOwnLate != 0 && !r.sendHeld && r.heldErr == nil
	r.restoreOwn(tagRestoreOwnLate, r.lateOwn, send)()
}

// resendLate is phase 4.
// A copy that failed its check, or was missing and not re-sent, is re-sent from its original.
// That needs the original to be sound (ring rightwards).
// A data file restored in phase 3 came from its right neighbour's copy, which is sound.
func (r *l2Recover) resendLate() {
	lateHeld := r.heldErr != nil && r.held.Valid() && r.fromLeft&flagOwnOK != 0
	if r.heldErr != nil && (r.fromLeft&flagOwnOK == 0 || !r.held.Valid()) {
		r.errs = append(r.errs, r.bothLost(r.left, r.me, r.heldErr))
	}
	// As the right neighbour decides: with the flags of round 2.
	send := r.flags2&flagOwnOK != 0 && r.fromRight&(flagHeldOK|flagHeldSent) == 0 && r.fromRight&flagHeldListed != 0
	r.resendHeld(tagRestoreHeldLate, lateHeld, send, nil)
}

// restoreOwnEnd is this rank's end of a restore of own.
// It receives own from its right neighbour's copy (need).
// It sends held to its left neighbour (send).
// It returns the end, the tmp name own is received under, and where its image goes.
func (r *l2Recover) restoreOwnEnd(need, send bool) (streamEnd, Ref, *[]byte) {
	own := r.own
	e := streamEnd{inOwner: r.me, keep: true} // the restart reads a restored data file next
	if send {
		h := r.held
		e.out = &h
	}
	tmp := Ref{Driver: own.Driver, Path: own.Path + TmpSuffix}
	img := new([]byte)
	if need {
		e.in, e.inSize, e.inHash, e.inFormat = &tmp, own.Size, own.Hash, own.Format
		if r.image {
			// The restart reads the bytes from memory: the file need not stay in the page cache.
			e.image, e.keep = img, false
		}
	}
	return e, tmp, img
}

// restoreOwnJoin ends a restore of own in the background: its fsync, checks and publication.
// They talk to no peer, so they run beside the next transfer.
// The returned join waits for them and takes their outcome.
func (r *l2Recover) restoreOwnJoin(wait func() (streamResult, error), need, send bool, tmp Ref, img *[]byte) (join func()) {
	type outcome struct{ err, pubErr error }
	done := make(chan outcome, 1)
	d, final := r.own.Driver, r.own.Path
	go func() {
		var oc outcome
		_, oc.err = wait()
		if oc.err == nil && need {
			oc.pubErr = vfd.RenameDurable(d, tmp.Path, final)
		}
		done <- oc
	}()
	return func() {
		oc := <-done
		r.restoredOwn(oc.err, oc.pubErr, need, send, img)
	}
}

// restoredOwn takes the outcome of a restore of own.
// err is the transfer's; pubErr the publication's.
func (r *l2Recover) restoredOwn(err, pubErr error, need, send bool, img *[]byte) {
	switch {
	case err != nil && need && errors.Is(err, ErrHashMismatch):
		r.copyBad = true
		r.errs = append(r.errs, r.bothLost(r.me, r.right, errors.Join(r.ownErr, err)))
	case err != nil && (need || !send):
		r.errs = append(r.errs, fmt.Errorf("restore data of rank %d from rank %d: %w", r.me, r.right, err))
	case err != nil:
		r.errs = append(r.errs, fmt.Errorf("send the copy of rank %d's data back to it: %w", r.left, err))
	case need && pubErr != nil:
		r.errs = append(r.errs, vfd.WrapPath(pubErr, "publish restored", r.own.Path))
	case need:
		r.res.OwnRebuilt, r.res.OwnImage, r.ownErr = true, *img, nil
		r.log.Info("restored data file from partner copy", zap.Int("from", r.right))
	}
}

// restoreOwn restores own (need) while sending held (send), under tag.
// It returns the join of the restore's end.
func (r *l2Recover) restoreOwn(tag int, need, send bool) (join func()) {
	e, tmp, img := r.restoreOwnEnd(need, send)
	return r.restoreOwnJoin(streamDeferred(r.c, r.left, r.right, tag, r.o, e), need, send, tmp, img)
}

// resendHeldEnd is this rank's end of a re-send of copies.
// It sends own to its right neighbour (send), from its image when there is one.
// It receives held from its left neighbour (need).
// A sender that turns out to have nothing sound offers nothing (optional).
func (r *l2Recover) resendHeldEnd(need, send bool, optional *bool) (streamEnd, Ref) {
	held := r.held
	e := streamEnd{inOwner: r.left, optional: optional}
	if send {
		src := r.own
		if r.res.OwnImage != nil {
			src.Image = r.res.OwnImage
		}
		e.out = &src
	}
	tmp := Ref{Driver: held.Driver, Path: held.Path + TmpSuffix}
	if need {
		e.in, e.inSize, e.inHash, e.inFormat = &tmp, held.Size, held.Hash, held.Format
	}
	return e, tmp
}

// resendHeldAfter takes the outcome err of a re-send and publishes the copy received.
// It reports whether held was re-sent.
func (r *l2Recover) resendHeldAfter(err error, need bool, optional *bool, tmp Ref) bool {
	switch {
	case err != nil:
		r.errs = append(r.errs, fmt.Errorf("re-send data of rank %d to rank %d: %w", r.left, r.me, err))
	case need && (optional == nil || !*optional):
		if err := vfd.RenameDurable(r.held.Driver, tmp.Path, r.held.Path); err != nil {
			r.errs = append(r.errs, fmt.Errorf("publish re-sent copy %s: %w", r.held.Path, err))
		} else {
			r.res.HeldRebuilt = true
			r.log.Info("re-sent partner copy", zap.Int("of", r.left))
			return true
		}
	}
	return false
}

// resendHeld re-sends copies under tag, as resendHeldEnd says.
// It reports whether held was re-sent.
func (r *l2Recover) resendHeld(tag int, need, send bool, optional *bool) bool {
	e, tmp := r.resendHeldEnd(need, send, optional)
	_, err := stream(r.c, r.right, r.left, tag, r.o, e)
	return r.resendHeldAfter(err, need, optional, tmp)
}
