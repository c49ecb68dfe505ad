package partner

import (
	"errors"
	"fmt"
	"io"
	"path"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/encode"
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
				return fmt.Errorf("read %s at %d: %w", src.Path, off, err)
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
	if err := mkdirDurable(dst.Driver, path.Dir(tmp)); err != nil {
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
	h, err := encode.HashReader(out, size, bs)
	if err != nil {
		return fail(err)
	}
	if size != dst.Size || h != dst.Hash {
		return fail(&CorruptionError{Path: dst.Path, Rank: -1, Offset: size, Err: fmt.Errorf("%w: rebuilt file does not match the recorded size and hash", ErrHashMismatch)})
	}
	if err := out.Close(); err != nil {
		return errors.Join(err, dst.Driver.Remove(tmp))
	}
	return publish(dst.Driver, tmp, dst.Path)
}

// RebuildL3Offline rebuilds lost L3 files of every group. data[r] is rank
// r's data file; parity[r] its parity file (zero FileInfo for ranks that
// hold none, group rank >= m); m as for [EncodeGroup]. Groups with more
// than m lost files are reported in an error wrapping [ErrUnrecoverable]
// naming the ranks whose data is gone; the other groups are still rebuilt.
func RebuildL3Offline(t *Topology, o Options, m int, data, parity []FileInfo) (Rebuilt, error) {
	n := t.NumRanks()
	if len(data) != n || len(parity) != n {
		return Rebuilt{}, fmt.Errorf("%w: %d data and %d parity files for %d ranks", ErrBadArgument, len(data), len(parity), n)
	}
	bs := o.block()
	var res Rebuilt
	var errs []error
	for g := range t.NumGroups() {
		members := t.GroupMembers(g)
		k := len(members)
		mm := ParityCount(k, m)
		code, err := encode.New(k, mm)
		if err != nil {
			return res, err
		}
		lost := make([]bool, k+mm)
		var names []string
		var gone []int
		for i, r := range members {
			if checkValid(data[r], r, bs) != nil {
				lost[i] = true
				names = append(names, fmt.Sprintf("d%d", i))
				gone = append(gone, r)
			}
			if i < mm && checkValid(parity[r], r, bs) != nil {
				lost[k+i] = true
				names = append(names, fmt.Sprintf("p%d", i))
			}
		}
		if len(names) == 0 {
			continue
		}
		if len(names) > mm {
			errs = append(errs, fmt.Errorf("%w: group %d lost %d of its %d files (%v), at most %d may be lost; data of ranks %v is gone",
				ErrUnrecoverable, g, len(names), k+mm, names, mm, gone))
			continue
		}
		if err := rebuildGroupOffline(code, members, data, parity, lost, bs, &res); err != nil {
			errs = append(errs, fmt.Errorf("group %d: %w", g, err))
		}
	}
	if len(res.Paths) > 0 {
		o.log().Info("L3 offline rebuild", zap.Strings("rebuilt", res.Paths))
	}
	return res, errors.Join(errs...)
}

func rebuildGroupOffline(code *encode.Code, members []int, data, parity []FileInfo, lost []bool, bs int, res *Rebuilt) error {
	k, m := code.K(), code.M()
	sizes := make([]int64, k)
	hashes := make([]encode.Hash, k)
	for i, r := range members {
		sizes[i], hashes[i] = data[members[i]].Size, data[r].Hash
	}
	padded := encode.PaddedSize(sizes)
	readers := make([]io.ReaderAt, k+m)
	writers := make([]io.WriterAt, k+m)
	targets := make([]FileInfo, k+m)
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	for i := range k + m {
		var f FileInfo
		if i < k {
			f = data[members[i]]
		} else {
			f = parity[members[i-k]]
		}
		targets[i] = f
		if !lost[i] {
			in, err := f.Driver.Open(f.Path, vfd.ReadOnly)
			if err != nil {
				return err
			}
			closers = append(closers, in)
			readers[i] = in
			continue
		}
		if !f.Valid() {
			return fmt.Errorf("%w: shard %d has no file to rebuild into", ErrBadArgument, i)
		}
		if err := mkdirDurable(f.Driver, path.Dir(f.Path)); err != nil {
			return err
		}
		out, err := vfd.CreateTrunc(f.Driver, f.Path+TmpSuffix)
		if err != nil {
			return err
		}
		closers = append(closers, out)
		writers[i] = out
	}
	removeTmps := func() {
		for i := range k + m {
			if lost[i] {
				_ = targets[i].Driver.Remove(targets[i].Path + TmpSuffix)
			}
		}
	}
	sr, err := code.ReconstructStream(readers, sizes, lost, writers, bs)
	if err != nil {
		removeTmps()
		return err
	}
	for i := range k {
		if sr.Data[i] != hashes[i] {
			removeTmps()
			return &CorruptionError{Path: targets[i].Path, Rank: members[i], Err: fmt.Errorf("%w: data after rebuild", ErrHashMismatch)}
		}
	}
	for j := range m {
		if !lost[k+j] {
			continue
		}
		hdr := &encode.ParityHeader{K: k, M: m, Index: j, Padded: padded, Payload: sr.Parity[j], Sizes: sizes, Hashes: hashes}
		b, err := hdr.Marshal()
		if err == nil {
			_, err = writers[k+j].WriteAt(b, padded)
		}
		if err != nil {
			removeTmps()
			return err
		}
	}
	for i := range k + m {
		if !lost[i] {
			continue
		}
		f := targets[i]
		out := writers[i].(vfd.File)
		err := out.Sync()
		var size int64
		var h encode.Hash
		if err == nil {
			size, err = out.Size()
		}
		if err == nil {
			h, err = encode.HashReader(out, size, bs)
		}
		if err == nil && (size != f.Size || h != f.Hash) {
			err = &CorruptionError{Path: f.Path, Rank: -1, Offset: size, Err: fmt.Errorf("%w: rebuilt file does not match the recorded size and hash", ErrHashMismatch)}
		}
		if err == nil {
			err = out.Close()
		}
		if err == nil {
			err = publish(f.Driver, f.Path+TmpSuffix, f.Path)
		}
		if err != nil {
			removeTmps()
			return err
		}
		res.Paths = append(res.Paths, f.Path)
	}
	return nil
}
