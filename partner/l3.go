package partner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"

	"github.com/zeebo/blake3"
	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/encode"
	"github.com/ftigo/ftigo/vfd"
)

// Parity describes the parity file a group member holds after L3 encoding.
type Parity struct {
	// Held is false for members that hold no parity (group rank >= m).
	Held bool
	// Index is the parity shard in the file (the member's group rank).
	Index int
	// Size and Hash are those of the whole file (payload and header).
	Size int64
	Hash encode.Hash
	// Header is the decoded header.
	Header *encode.ParityHeader
}

// ParityCount returns m for a group of k members: m itself when 1 <= m <= k,
// else k (FTI's default).
func ParityCount(k, m int) int {
	if m <= 0 || m > k {
		return k
	}
	return m
}

// groupComm splits the world into the group communicators (ring order).
func groupComm(c comm.Comm, t *Topology) (comm.Comm, error) {
	me := c.Rank()
	gc, err := c.Split(t.GroupOf(me), t.GroupRank(me))
	if err != nil {
		return nil, fmt.Errorf("split group communicator: %w", err)
	}
	return gc, nil
}

// gatherInfo shares every member's data size and hash (and a flag byte)
// over the group.
func gatherInfo(gc comm.Comm, size int64, h encode.Hash, flag byte) ([]int64, []encode.Hash, []byte, error) {
	send := make([]byte, 41)
	binary.LittleEndian.PutUint64(send, uint64(size))
	copy(send[8:], h[:])
	send[40] = flag
	recv := make([]byte, 41*gc.Size())
	if err := gc.Allgather(send, recv); err != nil {
		return nil, nil, nil, fmt.Errorf("allgather group info: %w", err)
	}
	k := gc.Size()
	sizes, hashes, flags := make([]int64, k), make([]encode.Hash, k), make([]byte, k)
	for i := range k {
		e := recv[41*i:]
		sizes[i] = int64(binary.LittleEndian.Uint64(e))
		copy(hashes[i][:], e[8:40])
		flags[i] = e[40]
	}
	return sizes, hashes, flags, nil
}

// EncodeGroup is L3's distributed encoding. Collective over the world c.
// Each rank passes its synced data file with the size and hash recorded
// for it; the member at group rank j < m (m from [ParityCount]) writes
// parity shard j to parityTo (a tmp name; payload, then the header trailer,
// synced). Files of different sizes are padded with zeros in memory only.
//
// The encoding is pipelined by blocks of o.BlockSize, as FTI does it: each
// member's data block travels once around the group ring (k-1 Sendrecv
// steps per block) and every parity holder multiplies each block it sees
// into its own parity row ([encode.Row]), so a member holds its own block,
// two blocks in transit and its parity block, whatever the group size. The
// data hash is checked while reading; a member that fails keeps exchanging
// (zeros) and returns its error at the end.
func EncodeGroup(c comm.Comm, t *Topology, o Options, m int, data FileInfo, parityTo Ref) (Parity, error) {
	gc, err := groupComm(c, t)
	if err != nil {
		return Parity{}, err
	}
	defer gc.Close()
	k, g := gc.Size(), gc.Rank()
	m = ParityCount(k, m)
	code, err := encode.New(k, m)
	if err != nil {
		return Parity{}, err
	}
	sizes, hashes, _, err := gatherInfo(gc, data.Size, data.Hash, 0)
	if err != nil {
		return Parity{}, err
	}
	padded := encode.PaddedSize(sizes)
	bs := int(min(int64(o.block()), max(padded, 1)))
	log := o.log()
	log.Debug("L3 encode", zap.Int("rank", c.Rank()), zap.Int("group-rank", g), zap.Int("k", k), zap.Int("m", m), zap.Int64("padded", padded))

	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// read-ahead (hashing the data as it goes) and write-behind (hashing the parity)
	pool := o.Buffers
	src, err := openSource(data, bs, true, pool)
	if err != nil {
		fail(fmt.Errorf("open data %s: %w", data.Path, err))
		src = nil
	}
	var out *sink
	holds := g < m
	if holds {
		out, err = createSink(parityTo, bs, padded, pool)
		if err != nil {
			fail(fmt.Errorf("create parity %s: %w", parityTo.Path, err))
			out = nil
		}
	}
	// FTI's scheme: each data block travels once around the ring; every
	// member multiplies each block it sees into its own parity row. A
	// member holds its own block, two blocks in transit and its parity block.
	var row *encode.Row
	if holds {
		if row, err = code.Row(g); err != nil {
			return Parity{}, err
		}
	}
	own := pool.get(bs)
	defer pool.put(own)
	acc := pool.get(bs)
	defer pool.put(acc)
	transit := [2][]byte{pool.get(bs), pool.get(bs)}
	defer pool.put(transit[0])
	defer pool.put(transit[1])
	right, left := (g+1)%k, (g+k-1)%k
	abort := func(err error) (Parity, error) {
		if src != nil {
			src.close()
		}
		if out != nil {
			out.abandon(parityTo.Driver)
		}
		return Parity{}, errors.Join(append(errs, err)...)
	}
	for off := int64(0); off < padded; off += int64(bs) {
		n := int(min(int64(bs), padded-off))
		blk := own[:n]
		var got []byte
		if src != nil && off < data.Size {
			got = src.next()
		}
		if len(got) == n {
			blk = got
		} else {
			copy(blk, got)
			clear(blk[len(got):])
		}
		a := acc[:n]
		if holds {
			clear(a)
			if err := row.Add(blk, g, a); err != nil {
				fail(err)
			}
		}
		send := blk
		for s := 1; s < k; s++ {
			rb := transit[s%2][:n]
			nr, err := gc.Sendrecv(send, right, tagEncode, rb, left, tagEncode)
			if err == nil && nr != n {
				err = fmt.Errorf("%w: L3 encode: %d-byte block from group rank %d, want %d", ErrBadArgument, nr, left, n)
			}
			if err != nil {
				return abort(fmt.Errorf("L3 encode exchange at %d: %w", off, err))
			}
			if s == 1 && got != nil {
				src.release(got) // own block sent and added
				got = nil
			}
			if holds {
				if err := row.Add(rb, ((g-s)%k+k)%k, a); err != nil {
					fail(err)
				}
			}
			send = rb
		}
		if got != nil {
			src.release(got)
		}
		if out != nil {
			b := out.buffer()
			copy(b, a)
			out.put(b[:n])
		}
	}
	if src != nil {
		h, _, err := src.close()
		fail(err)
		if err == nil && h != data.Hash {
			fail(&CorruptionError{Path: data.Path, Rank: c.Rank(), Err: fmt.Errorf("%w: data changed before encoding", ErrHashMismatch)})
		}
	}
	if !holds {
		return Parity{Index: g}, errors.Join(errs...)
	}
	hdr := &encode.ParityHeader{K: k, M: m, Index: g, Padded: padded, Sizes: sizes, Hashes: hashes}
	res := Parity{Held: true, Index: g, Header: hdr}
	if out != nil {
		_, whole, size, err := out.finishWith(func(body encode.Hash) ([]byte, error) {
			hdr.Payload = body
			return hdr.Marshal()
		})
		if err != nil {
			fail(fmt.Errorf("finish parity %s: %w", parityTo.Path, err))
			_ = parityTo.Driver.Remove(parityTo.Path)
		}
		res.Size, res.Hash = size, whole
	}
	return res, errors.Join(errs...)
}

// tagEncode and tagDecode are the L3 message tags (group communicator).
const (
	tagEncode = 0x6640
)

// L3Recovery says what [RebuildGroup] did on one rank.
type L3Recovery struct {
	DataRebuilt, ParityRebuilt bool
	// Lost lists the group ranks whose data (d) or parity (p) file was lost,
	// e.g. "d0 p0 d1 p1".
	Lost []string
}

const (
	lostData   = 1
	lostParity = 2
)

// RebuildGroup is L3's recovery. Collective over the world c. data is this
// rank's data file and parity its parity file (Ref zero when the member
// holds none), each with the size and hash of the whole file recorded at
// checkpoint time; m as for [EncodeGroup]. Every member checks its files,
// the erasure flags are gathered over the group, and when no more than m of
// the k+m files are lost, the lost data and parity files are rebuilt block
// by block (each block of every surviving file is all-gathered over the
// group), written under tmp names, synced, checked against the recorded
// hashes and renamed into place. More than m losses give an error wrapping
// [ErrUnrecoverable] on every member, naming the lost files; nothing is
// written then.
func RebuildGroup(c comm.Comm, t *Topology, o Options, m int, data, parity FileInfo) (L3Recovery, error) {
	gc, err := groupComm(c, t)
	if err != nil {
		return L3Recovery{}, err
	}
	defer gc.Close()
	k, g := gc.Size(), gc.Rank()
	m = ParityCount(k, m)
	holds := g < m
	bs := o.block()
	var flag byte
	if !data.Valid() {
		flag |= lostData
	} else if err := data.Check(c.Rank(), bs); err != nil {
		flag |= lostData
		o.log().Info("L3: data file lost", zap.Int("rank", c.Rank()), zap.Error(err))
	}
	var hdr *encode.ParityHeader
	if holds && !parity.Valid() {
		flag |= lostParity
		o.log().Info("L3: no parity file listed", zap.Int("rank", c.Rank()))
	} else if holds {
		if err := parity.Check(c.Rank(), bs); err != nil {
			flag |= lostParity
			o.log().Info("L3: parity file lost", zap.Int("rank", c.Rank()), zap.Error(err))
		} else if f, err := parity.Driver.Open(parity.Path, vfd.ReadOnly); err == nil {
			hdr, err = encode.ReadParityHeader(f, parity.Size, parity.Path)
			f.Close()
			if err != nil || hdr.K != k || hdr.M != m || hdr.Index != g {
				flag |= lostParity
				o.log().Info("L3: parity header does not fit the group", zap.Int("rank", c.Rank()), zap.Error(err))
			}
		} else {
			flag |= lostParity
		}
	}
	sizes, hashes, flags, err := gatherInfo(gc, data.Size, data.Hash, flag)
	if err != nil {
		return L3Recovery{}, err
	}
	var res L3Recovery
	lost := make([]bool, k+m)
	nlost := 0
	var lostRanks []int
	for i, f := range flags {
		if f&lostData != 0 {
			lost[i] = true
			res.Lost = append(res.Lost, fmt.Sprintf("d%d", i))
			lostRanks = append(lostRanks, t.Member(c.Rank(), i))
			nlost++
		}
		if i < m && f&lostParity != 0 {
			lost[k+i] = true
			res.Lost = append(res.Lost, fmt.Sprintf("p%d", i))
			nlost++
		}
	}
	if nlost > m {
		return res, fmt.Errorf("%w: group %d lost %d of its %d files (%v), at most %d may be lost; data of ranks %v is gone",
			ErrUnrecoverable, t.GroupOf(c.Rank()), nlost, k+m, res.Lost, m, lostRanks)
	}
	if nlost == 0 {
		return res, nil
	}
	code, err := encode.New(k, m)
	if err != nil {
		return res, err
	}
	padded := encode.PaddedSize(sizes)
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	// my surviving files to read, my lost files to write
	var dsrc, psrc vfd.File
	var dout, pout vfd.File
	dtmp, ptmp := data.Path+TmpSuffix, parity.Path+TmpSuffix
	if !lost[g] {
		if dsrc, err = data.Driver.Open(data.Path, vfd.ReadOnly); err != nil {
			fail(err)
		}
	} else if !data.Valid() {
		fail(fmt.Errorf("%w: rank %d: no data file to rebuild into", ErrBadArgument, c.Rank()))
	} else if err = mkdirDurable(data.Driver, path.Dir(dtmp)); err != nil {
		fail(err)
	} else if dout, err = vfd.CreateTrunc(data.Driver, dtmp); err != nil {
		fail(err)
	}
	if holds {
		if !lost[k+g] {
			if psrc, err = parity.Driver.Open(parity.Path, vfd.ReadOnly); err != nil {
				fail(err)
			}
		} else if !parity.Valid() {
			fail(fmt.Errorf("%w: rank %d: no parity file to rebuild into", ErrBadArgument, c.Rank()))
		} else if err = mkdirDurable(parity.Driver, path.Dir(ptmp)); err != nil {
			fail(err)
		} else if pout, err = vfd.CreateTrunc(parity.Driver, ptmp); err != nil {
			fail(err)
		}
	}
	dh, fh := blake3.New(), blake3.New()
	bs = int(min(int64(bs), max(padded, 1)))
	slot := 2 * bs
	send := o.Buffers.get(slot)
	defer o.Buffers.put(send)
	recv := o.Buffers.get(slot * k)
	defer o.Buffers.put(recv)
	for off := int64(0); off < padded; off += int64(bs) {
		n := int(min(int64(bs), padded-off))
		sd, sp := send[:n], send[n:2*n]
		clear(send[:2*n])
		if dsrc != nil {
			if err := encode.ReadBlock(dsrc, data.Size, sd, off); err != nil {
				fail(fmt.Errorf("read %s: %w", data.Path, err))
				dsrc.Close()
				dsrc = nil
			}
		}
		if psrc != nil {
			if err := encode.ReadBlock(psrc, padded, sp, off); err != nil {
				fail(fmt.Errorf("read %s: %w", parity.Path, err))
				psrc.Close()
				psrc = nil
			}
		}
		if err := gc.Allgather(send[:2*n], recv[:2*n*k]); err != nil {
			return res, errors.Join(append(errs, fmt.Errorf("L3 rebuild allgather at %d: %w", off, err))...)
		}
		shards := make([][]byte, k+m)
		for i := range k {
			shards[i] = recv[2*n*i : 2*n*i+n]
		}
		for j := range m {
			shards[k+j] = recv[2*n*j+n : 2*n*(j+1)]
		}
		if !lost[g] && !(holds && lost[k+g]) {
			continue // nothing of mine to rebuild; keep the pace of the group
		}
		if err := code.Reconstruct(shards, lost); err != nil {
			fail(err)
			continue
		}
		if dout != nil && off < data.Size {
			b := shards[g][:min(int64(n), data.Size-off)]
			dh.Write(b)
			if _, err := dout.WriteAt(b, off); err != nil {
				fail(err)
			}
		}
		if pout != nil {
			fh.Write(shards[k+g])
			if _, err := pout.WriteAt(shards[k+g], off); err != nil {
				fail(err)
			}
		}
	}
	for _, f := range []vfd.File{dsrc, psrc} {
		if f != nil {
			fail(f.Close())
		}
	}
	finish := func(d vfd.Driver, f vfd.File, tmp, final string, got, want encode.Hash, what string) bool {
		err := f.Sync()
		err = errors.Join(err, f.Close())
		if err == nil && got != want {
			err = &CorruptionError{Path: final, Rank: c.Rank(), Err: fmt.Errorf("%w: rebuilt %s does not match the recorded hash", ErrHashMismatch, what)}
		}
		if err == nil && len(errs) == 0 {
			err = publish(d, tmp, final)
			if err == nil {
				return true
			}
		}
		fail(err)
		return false
	}
	if dout != nil {
		var h encode.Hash
		copy(h[:], dh.Sum(nil))
		res.DataRebuilt = finish(data.Driver, dout, dtmp, data.Path, h, data.Hash, "data")
		if !res.DataRebuilt {
			_ = data.Driver.Remove(dtmp)
		}
	}
	if pout != nil {
		hdr := &encode.ParityHeader{K: k, M: m, Index: g, Padded: padded, Sizes: sizes, Hashes: hashes}
		copy(hdr.Payload[:], fh.Sum(nil))
		b, err := hdr.Marshal()
		if err == nil {
			fh.Write(b)
			_, err = pout.WriteAt(b, padded)
		}
		fail(err)
		var h encode.Hash
		copy(h[:], fh.Sum(nil))
		res.ParityRebuilt = finish(parity.Driver, pout, ptmp, parity.Path, h, parity.Hash, "parity")
		if !res.ParityRebuilt {
			_ = parity.Driver.Remove(ptmp)
		}
	}
	return res, errors.Join(errs...)
}
