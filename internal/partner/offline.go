package partner

import (
	"errors"
	"fmt"
	"io"
	"path"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// Offline rebuild: the same recoveries as [RecoverPartner] and
// [RebuildGroup], run by one process that sees every node's files (the
// `ftigo rebuild` command, after a job died), with no communicator.

// Rebuilt lists the files an offline rebuild wrote.
type Rebuilt struct {
	Paths []string
}

// RebuildL2Offline restores lost or corrupted L2 files. own[r] is rank r's
// data file and held[r] the copy rank r keeps of its left neighbour's data
// file, each with the size and hash recorded at checkpoint time. A data
// file is restored from its copy, a copy from its data file; a rank whose
// file and copy are both bad is reported in an error wrapping
// [ErrUnrecoverable] (the other ranks are still rebuilt).
func RebuildL2Offline(t *Topology, o Options, own, held []FileInfo) (Rebuilt, error) {
	n := t.NumRanks()
	if len(own) != n || len(held) != n {
		return Rebuilt{}, fmt.Errorf("%w: %d data and %d copies for %d ranks", ErrBadArgument, len(own), len(held), n)
	}
	bs := o.block()
	var res Rebuilt
	var errs []error
	for r := range n {
		cp := held[t.Right(r)] // the copy of r's data
		oerr := checkValid(own[r], r, bs)
		cerr := checkValid(cp, r, bs)
		switch {
		case oerr == nil && cerr == nil:
		case oerr != nil && cerr != nil:
			errs = append(errs, fmt.Errorf("%w: rank %d: data file (%v) and its partner copy on rank %d (%v) are both lost",
				ErrUnrecoverable, r, oerr, t.Right(r), cerr))
		case oerr != nil:
			if err := copyVerified(cp, own[r], bs); err != nil {
				errs = append(errs, fmt.Errorf("restore data of rank %d: %w", r, err))
			} else {
				res.Paths = append(res.Paths, own[r].Path)
			}
		default:
			if err := copyVerified(own[r], cp, bs); err != nil {
				errs = append(errs, fmt.Errorf("restore partner copy of rank %d: %w", r, err))
			} else {
				res.Paths = append(res.Paths, cp.Path)
			}
		}
	}
	if len(res.Paths) > 0 {
		o.log().Info("L2 offline rebuild", zap.Strings("rebuilt", res.Paths))
	}
	return res, errors.Join(errs...)
}

func checkValid(f FileInfo, rank, bs int) error {
	if !f.Valid() {
		return errNotListed
	}
	return f.Check(rank, bs)
}

// copyVerified copies src to dst (tmp name, sync, hash check, rename).
func copyVerified(src, dst FileInfo, bs int) error {
	if !dst.Valid() {
		return errNotListed
	}
	in, err := src.Driver.Open(src.Path, vfd.ReadOnly)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeVerified(dst, func(out io.WriterAt) error {
		buf := make([]byte, min(int64(bs), max(src.Size, 1)))
		for off := int64(0); off < src.Size; off += int64(len(buf)) {
			n := int(min(int64(len(buf)), src.Size-off))
			if err := vfd.ReadFull(in, buf[:n], off); err != nil {
				return vfd.WrapPathAt(err, "read", src.Path, off)
			}
			if _, err := out.WriteAt(buf[:n], off); err != nil {
				return err
			}
		}
		return nil
	}, bs)
}

// writeVerified writes dst under its tmp name with fill, syncs it, checks
// its size and hash against dst's, and renames it into place.
func writeVerified(dst FileInfo, fill func(out io.WriterAt) error, bs int) error {
	tmp := dst.Path + TmpSuffix
	if err := vfd.MkdirDurable(dst.Driver, path.Dir(tmp)); err != nil {
		return err
	}
	out, err := vfd.CreateTrunc(dst.Driver, tmp)
	if err != nil {
		return err
	}
	fail := func(err error) error { return errors.Join(err, out.Close(), dst.Driver.Remove(tmp)) }
	if err := fill(out); err != nil {
		return fail(err)
	}
	if err := out.Sync(); err != nil {
		return fail(err)
	}
	size, err := out.Size()
	if err != nil {
		return fail(err)
	}
	if dst.Format != nil {
		// Checked by its format, as its entry records it.
		written := dst
		written.Path, written.Image = tmp, nil
		if size != dst.Size {
			return fail(&CorruptionError{Path: dst.Path, Rank: -1, Offset: size, Err: fmt.Errorf("%w: rebuilt file does not match the recorded size", ErrHashMismatch)})
		}
		if _, err := dst.Format.Check(written, -1, false); err != nil {
			return fail(err)
		}
	} else {
		h, err := encode.HashReader(out, size, bs)
		if err != nil {
			return fail(err)
		}
		if size != dst.Size || h != dst.Hash {
			return fail(&CorruptionError{Path: dst.Path, Rank: -1, Offset: size, Err: fmt.Errorf("%w: rebuilt file does not match the recorded size and hash", ErrHashMismatch)})
		}
	}
	if err := out.Close(); err != nil {
		return errors.Join(err, dst.Driver.Remove(tmp))
	}
	return vfd.RenameDurable(dst.Driver, tmp, dst.Path)
}

// RebuildL3Offline rebuilds lost L3 files of every group. data[r] is rank
// r's data file and parity[r] its parity file. Each comes with the size
// and hash recorded at checkpoint time. shapes[r] is the shape recorded
// for rank r's parity, as for [RebuildGroup]. The stripe unit differs
// between groups whose largest files differ. It runs
// [RebuildGroup] for every rank in an in-process world (one goroutine per
// rank), so the offline and the online rebuild are one code. Groups that
// lost more than they tolerate are reported in an error wrapping
// [ErrUnrecoverable] naming the ranks whose data is gone; the other groups
// are still rebuilt.
func RebuildL3Offline(t *Topology, o Options, shapes []Shape, data, parity []FileInfo) (Rebuilt, error) {
	n := t.NumRanks()
	if len(data) != n || len(parity) != n || len(shapes) != n {
		return Rebuilt{}, fmt.Errorf("%w: %d data files, %d parity files and %d shapes for %d ranks", ErrBadArgument, len(data), len(parity), len(shapes), n)
	}
	recs := make([]L3Recovery, n)
	errs := make([]error, n)
	err := comm.Run(n, func(c comm.Comm) error {
		r := c.Rank()
		recs[r], errs[r] = RebuildGroup(c, t, o, shapes[r], data[r], parity[r])
		return nil
	})
	if err != nil {
		return Rebuilt{}, err
	}
	var res Rebuilt
	var out []error
	seen := map[string]bool{}
	for r := range n {
		if recs[r].DataRebuilt {
			res.Paths = append(res.Paths, data[r].Path)
		}
		if recs[r].ParityRebuilt {
			res.Paths = append(res.Paths, parity[r].Path)
		}
		// every member of an unrecoverable group reports the same error
		if e := errs[r]; e != nil && !seen[e.Error()] {
			seen[e.Error()] = true
			out = append(out, e)
		}
	}
	if len(res.Paths) > 0 {
		o.log().Info("L3 offline rebuild", zap.Strings("rebuilt", res.Paths))
	}
	return res, errors.Join(out...)
}
