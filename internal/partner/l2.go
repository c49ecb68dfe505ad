package partner

import (
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/encode"
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

// CopyToPartner is L2's transfer. Collective over the world c: every
// rank calls it at the same time. Each rank streams own to its right
// neighbour in the group ring. own is its synced data file, with its
// recorded size and hash. It receives its left neighbour's file into
// copyTo, the name the caller chose. The copy is written, synced and
// hash-checked. The blocks are of o.BlockSize, moved with Sendrecv; a
// rank holds a few at most. The hash of own is checked as it is read. A
// mismatch on either side is an error on that rank. The receiver removes
// a copy that fails its check. With own.HashUnknown the hash is computed
// as own is read (returned in Copy.Sent). The receiver checks the copy
// against it. A local failure never stops the exchange, so every rank
// returns.
func CopyToPartner(c comm.Comm, t *Topology, o Options, own FileInfo, copyTo Ref) (Copy, error) {
	me := c.Rank()
	right, left := t.Right(me), t.Left(me)
	o.log().Debug("partner copy", zap.Int("right", right), zap.Int("left", left), zap.Int64("size", own.Size))
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
