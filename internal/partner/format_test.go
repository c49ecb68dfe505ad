package partner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/b3"
	"github.com/ftigo/ftigo/internal/encode"
	"github.com/ftigo/ftigo/vfd"
)

// testFormat is a Format for the tests: a file's digest is the BLAKE3 of
// its bytes with its first byte inverted (so that it is not the plain
// BLAKE3 a transfer would compare), its preamble "TFMT", the size and the
// digest; it counts the bytes its checkers see and the preambles read.
type testFormat struct {
	checked   atomic.Int64
	preambles atomic.Int64
	// checks counts the calls of Check, fromFile those that read the file.
	checks, fromFile atomic.Int64
}

func formatDigest(b []byte) encode.Hash {
	h := encode.Sum(b)
	h[0] ^= 0xff
	return h
}

func (x *testFormat) Check(f FileInfo, rank int, image bool) ([]byte, error) {
	x.checks.Add(1)
	b := f.Image
	if b == nil {
		x.fromFile.Add(1)
		var err error
		if b, err = vfd.ReadFile(f.Driver, f.Path); err != nil {
			return nil, &CorruptionError{Path: f.Path, Rank: rank, Err: err}
		}
	}
	if int64(len(b)) != f.Size || formatDigest(b) != f.Hash {
		return nil, &CorruptionError{Path: f.Path, Rank: rank, Err: fmt.Errorf("%w: test format", ErrHashMismatch)}
	}
	if image {
		return b, nil
	}
	return nil, nil
}

func (x *testFormat) Preamble(f FileInfo, rank int) ([]byte, error) {
	x.preambles.Add(1)
	p := append([]byte("TFMT"), make([]byte, 8)...)
	binary.LittleEndian.PutUint64(p[4:], uint64(f.Size))
	return append(p, f.Hash[:]...), nil
}

func (x *testFormat) NewChecker(p []byte, path string, rank int, size int64, hash encode.Hash) (Checker, error) {
	if len(p) != 44 || string(p[:4]) != "TFMT" || int64(binary.LittleEndian.Uint64(p[4:])) != size || encode.Hash(p[12:]) != hash {
		return nil, &CorruptionError{Path: path, Rank: rank, Err: fmt.Errorf("%w: bad test preamble", ErrHashMismatch)}
	}
	return &testChecker{x: x, h: b3.New(), want: hash, size: size}, nil
}

type testChecker struct {
	x    *testFormat
	h    *b3.Hasher
	n    int64
	size int64
	want encode.Hash
}

func (c *testChecker) Write(b []byte) (int, error) {
	c.x.checked.Add(int64(len(b)))
	c.n += int64(len(b))
	c.h.Write(b)
	return len(b), nil
}

func (c *testChecker) Close() error {
	var got encode.Hash
	copy(got[:], c.h.Sum(nil))
	got[0] ^= 0xff
	if got != c.want || c.n != c.size {
		return fmt.Errorf("%w: test checker", ErrHashMismatch)
	}
	return nil
}

// formatted returns f checked by x.
func formatted(f FileInfo, x *testFormat, data []byte) FileInfo {
	f.Format, f.Hash = x, formatDigest(data)
	return f
}

// TestCopyFormattedHashesOnce: a file checked by its format is sent with
// its preamble and not hashed by anyone but the receiver's checker, which
// sees each byte once; the copy records the format's digest. The same
// copy with the hash left to the transfer (HashUnknown, the BLAKE3
// path) hashes every byte twice, once on each side.
func TestCopyFormattedHashesOnce(t *testing.T) {
	for _, withFormat := range []bool{true, false} {
		t.Run(fmt.Sprintf("format %v", withFormat), func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, 4, 1, 4, func(r int) int { return 5000 + 333*r })
			x := &testFormat{}
			var hashed atomic.Int64
			cps := make([]Copy, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				own := cl.own(r)
				if withFormat {
					own = formatted(own, x, cl.data[r])
				} else {
					own.Hash, own.HashUnknown = encode.Hash{}, true
				}
				o := Options{BlockSize: 700, Format: x, hashed: &hashed}
				var err error
				cps[r], err = CopyToPartner(c, cl.topo, o, own, Ref{cl.d, cl.copyPath(r)})
				return err
			}))
			var total int64
			for r := range 4 {
				l := cl.topo.Left(r)
				total += cl.sizes[r]
				assert.Equal(t, cl.data[l], cl.read(cl.copyPath(r)), "copy held by %d", r)
				assert.Equal(t, withFormat, cps[r].Formatted)
				if withFormat {
					assert.Equal(t, formatDigest(cl.data[l]), cps[r].Hash)
				} else {
					assert.Equal(t, encode.Sum(cl.data[l]), cps[r].Hash)
					assert.Equal(t, encode.Sum(cl.data[r]), cps[r].Sent)
				}
			}
			if withFormat {
				assert.Equal(t, int64(0), hashed.Load(), "nobody hashes a formatted file")
				assert.Equal(t, total, x.checked.Load(), "the receivers check each byte once")
				assert.Equal(t, int64(4), x.preambles.Load())
			} else {
				assert.Equal(t, 2*total, hashed.Load(), "sender and receiver hash each byte")
				assert.Equal(t, int64(0), x.checked.Load())
			}
		})
	}
}

// TestCopyFormattedRefusesDamage: a formatted copy is refused by its
// receiver (the copy removed, ErrHashMismatch naming the sender's rank)
// when a byte of the sender's file changed since its digest was taken,
// when the preamble describes another file, or when the receiver has no
// format to check it with; the other ranks' copies go through.
func TestCopyFormattedRefusesDamage(t *testing.T) {
	for _, tc := range []string{"source byte", "preamble", "no format"} {
		t.Run(tc, func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, 4, 1, 4, func(r int) int { return 4000 + 10*r })
			x := &testFormat{}
			digests := make([]encode.Hash, 4)
			for r := range 4 {
				digests[r] = formatDigest(cl.data[r])
			}
			switch tc {
			case "source byte":
				b := bytes.Clone(cl.data[1])
				b[1234] ^= 0x20
				require.NoError(t, vfd.WriteFileAtomic(cl.d, cl.dataPath(1), b))
			case "preamble":
				digests[1][5] ^= 1
			}
			errs := make([]error, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				own := cl.own(r)
				own.Format, own.Hash = x, digests[r]
				o := Options{BlockSize: 512, Format: x}
				if tc == "no format" && r == 2 {
					o.Format = nil
				}
				_, errs[r] = CopyToPartner(c, cl.topo, o, own, Ref{cl.d, cl.copyPath(r)})
				return nil
			}))
			for r, err := range errs {
				if r != 2 {
					if tc == "preamble" && r == 1 {
						continue // its own digest is wrong: it did not check, its receiver did
					}
					require.NoError(t, err, "rank %d", r)
					continue
				}
				require.ErrorIs(t, err, ErrHashMismatch)
				var ce *CorruptionError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, 1, ce.Rank, "names the rank whose data it is")
				_, serr := cl.d.Stat(cl.copyPath(2))
				assert.True(t, errors.Is(serr, fs.ErrNotExist), "refused copy removed: %v", serr)
			}
		})
	}
}

// TestRecoverFormatted: RecoverPartner with files checked by their
// format restores a lost data file from its copy, checked once as it
// arrives, re-sends a missing copy, and refuses a damaged copy.
func TestRecoverFormatted(t *testing.T) {
	for _, flipped := range []bool{false, true} {
		t.Run(fmt.Sprintf("flipped %v", flipped), func(t *testing.T) {
			lg := vfd.NewLog(vfd.Sec2{}, nil)
			cl := newCluster(t, lg, 4, 1, 4, func(r int) int { return 6000 + 55*r })
			cl.l2Protect(512)
			x := &testFormat{}
			require.NoError(t, cl.d.RemoveAll(cl.nodeDir(1))) // rank 1's data file and its copy of rank 0
			require.NoError(t, cl.d.MkdirAll(cl.nodeDir(1), 0o755))
			if flipped {
				b := cl.read(cl.copyPath(2))
				b[100] ^= 0x20
				require.NoError(t, vfd.WriteFileAtomic(cl.d, cl.copyPath(2), b))
			}
			errs := make([]error, 4)
			res := make([]L2Recovery, 4)
			read0 := lg.Stats().BytesRead
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				own := formatted(cl.own(r), x, cl.data[r])
				held := formatted(cl.held(r), x, cl.data[cl.topo.Left(r)])
				if r != 1 {
					own.Image, own.CheckErr = own.CheckImage(r, 512)
					own.Checked = true
				}
				res[r], errs[r] = RecoverPartner(c, cl.topo, Options{BlockSize: 512, Format: x}, own, held)
				return nil
			}))
			if flipped {
				require.ErrorIs(t, errs[1], ErrUnrecoverable)
				require.ErrorIs(t, errs[1], ErrHashMismatch)
				_, err := cl.d.Stat(cl.dataPath(1))
				assert.ErrorIs(t, err, fs.ErrNotExist, "nothing published")
				return
			}
			read := lg.Stats().BytesRead - read0
			for r := range 4 {
				require.NoError(t, errs[r], "rank %d", r)
			}
			require.True(t, res[1].OwnRebuilt)
			require.True(t, res[1].HeldRebuilt)
			assert.Equal(t, cl.data[1], cl.read(cl.dataPath(1)))
			assert.Equal(t, cl.data[0], cl.read(cl.copyPath(1)))
			// The restore and the re-send are checked as they arrive,
			// once each; the held copies of ranks 0 and 3 by Check.
			assert.Equal(t, cl.sizes[1]+cl.sizes[0], x.checked.Load())
			// Each byte read once: data files of 0, 2, 3 (checked), the
			// copy on rank 2 (sent), the copies on 0 and 3 (checked).
			want := cl.sizes[0] + cl.sizes[2] + cl.sizes[3] + cl.sizes[1] + cl.sizes[3] + cl.sizes[2]
			assert.Equal(t, want, read)
		})
	}
}

// TestL3Formatted: the encoder reads a data file checked by its format
// without hashing it (only the parity it writes is hashed), and a data
// file rebuilt from parity is checked by the format (from the rebuild's
// image when there is one, else read back), refused when the parity
// encodes other bytes than the recorded digest's.
func TestL3Formatted(t *testing.T) {
	for _, tc := range []string{"image", "read back", "damaged source"} {
		t.Run(tc, func(t *testing.T) {
			cl := newCluster(t, vfd.Sec2{}, 4, 1, 4, func(r int) int { return 3000 + 100*r })
			x := &testFormat{}
			digests := make([]encode.Hash, 4)
			for r := range 4 {
				digests[r] = formatDigest(cl.data[r])
			}
			if tc == "damaged source" {
				// rank 1's file changed after its digest was taken: the
				// encoder does not notice, the parity encodes the change
				b := bytes.Clone(cl.data[1])
				b[77] ^= 0x08
				require.NoError(t, vfd.WriteFileAtomic(cl.d, cl.dataPath(1), b))
			}
			var hashed atomic.Int64
			par := make([]Parity, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				own := cl.own(r)
				own.Format, own.Hash = x, digests[r]
				var err error
				par[r], err = EncodeGroup(c, cl.topo, Options{BlockSize: 512, hashed: &hashed}, 0, own, Ref{cl.d, cl.parityPath(r)})
				return err
			}))
			var parity int64 // payload bytes: the header trailer is hashed apart
			for r := range 4 {
				hdr, err := par[r].Header.Marshal()
				require.NoError(t, err)
				parity += par[r].Size - int64(len(hdr))
				assert.Equal(t, encode.Sum(cl.read(cl.parityPath(r))), par[r].Hash)
				assert.Equal(t, digests, par[r].Header.Hashes, "the header lists the recorded digests")
			}
			assert.Equal(t, parity, hashed.Load(), "only the parity payload is hashed (in the encoder)")

			require.NoError(t, os.Remove(cl.dataPath(1)))
			require.NoError(t, os.Remove(cl.parityPath(1)))
			res := make([]L3Recovery, 4)
			errs := make([]error, 4)
			require.NoError(t, cl.run(func(c comm.Comm) error {
				r := c.Rank()
				own := cl.own(r)
				own.Format, own.Hash = x, digests[r]
				pi := FileInfo{Ref: Ref{cl.d, cl.parityPath(r)}, Size: par[r].Size, Hash: par[r].Hash}
				o := Options{BlockSize: 512}
				if tc != "read back" {
					o.ImageLimit = 1 << 20
				}
				res[r], errs[r] = RebuildGroup(c, cl.topo, o, Shape{}, own, pi)
				return nil
			}))
			if tc == "damaged source" {
				require.ErrorIs(t, errs[1], ErrHashMismatch)
				assert.False(t, res[1].DataRebuilt)
				_, err := os.Stat(cl.dataPath(1))
				assert.ErrorIs(t, err, fs.ErrNotExist, "nothing published")
				_, err = os.Stat(cl.dataPath(1) + TmpSuffix)
				assert.ErrorIs(t, err, fs.ErrNotExist, "tmp removed")
				return
			}
			for r := range 4 {
				require.NoError(t, errs[r], "rank %d", r)
			}
			require.True(t, res[1].DataRebuilt)
			assert.Equal(t, cl.data[1], cl.read(cl.dataPath(1)))
			// Every rank checks its own file (rank 1's is missing), rank
			// 1 its rebuilt one.
			assert.Equal(t, int64(5), x.checks.Load())
			if tc == "image" {
				assert.Equal(t, cl.data[1], res[1].DataImage)
				assert.Equal(t, int64(4), x.fromFile.Load(), "the rebuilt file is checked in memory")
			} else {
				assert.Equal(t, int64(5), x.fromFile.Load(), "the rebuilt file is read back")
			}
		})
	}
}
