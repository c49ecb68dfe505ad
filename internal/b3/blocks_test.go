package b3

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

type mismatch struct{ block int64 }

func (m mismatch) Error() string { return fmt.Sprintf("block %d", m.block) }

// blockObject is an object of n bytes in blocks of bs, with its digests
// and a log of the ranges read.
type blockObject struct {
	data   []byte
	digest [][Size]byte
	mu     sync.Mutex
	reads  [][2]int64
}

func newBlockObject(n, bs int) *blockObject {
	o := &blockObject{data: input(n)}
	for off := 0; off < n; off += bs {
		o.digest = append(o.digest, Sum256(o.data[off:min(off+bs, n)]))
	}
	return o
}

func (o *blockObject) blocks(bs, seg int64, workers int) *Blocks {
	return &Blocks{
		Len: int64(len(o.data)), BlockSize: bs, Segment: seg, Workers: workers,
		ReadAt: func(p []byte, off int64) error {
			o.mu.Lock()
			o.reads = append(o.reads, [2]int64{off, off + int64(len(p))})
			o.mu.Unlock()
			if off < 0 || off+int64(len(p)) > int64(len(o.data)) {
				return fmt.Errorf("read [%d, %d) outside the object", off, off+int64(len(p)))
			}
			copy(p, o.data[off:])
			return nil
		},
		Want:     func(j int64) [Size]byte { return o.digest[j] },
		Mismatch: func(j int64) error { return mismatch{j} },
	}
}

// TestBlocksReadRange reads ranges at and across block edges. The bytes
// must be the object's. Every read must start on a block boundary and end
// on one or at the object's end, so that every block read is checked.
func TestBlocksReadRange(t *testing.T) {
	const bs = 1000
	const n = 10*bs + 337 // a short last block
	o := newBlockObject(n, bs)
	for _, rg := range [][2]int64{
		{0, n}, {0, 1}, {1, 2}, {999, 1001}, {1000, 2000}, {1000, 2001}, {999, 2000}, {500, 9500},
		{10 * bs, n}, {n - 1, n}, {10*bs - 1, n}, {3500, 3600}, {n, n}, {2000, 2000},
	} {
		for _, seg := range []int64{bs, 3 * bs, 1 << 20} {
			o.reads = nil
			dst := make([]byte, rg[1]-rg[0])
			if err := o.blocks(bs, seg, 2).ReadRange(dst, rg[0]); err != nil {
				t.Fatalf("range %v seg %d: %v", rg, seg, err)
			}
			if string(dst) != string(o.data[rg[0]:rg[1]]) {
				t.Fatalf("range %v seg %d: wrong bytes", rg, seg)
			}
			for _, r := range o.reads {
				if r[0]%bs != 0 || (r[1]%bs != 0 && r[1] != n) || r[1]-r[0] > max(seg/bs, 1)*bs {
					t.Fatalf("range %v seg %d: read %v is not whole blocks of one segment", rg, seg, r)
				}
			}
		}
	}
}

// TestBlocksMismatch damages two blocks. A read must report the lowest
// damaged block it touches, hashing in the foreground or the background.
// Blocks outside the range must not be checked.
func TestBlocksMismatch(t *testing.T) {
	const bs = 16 << 10
	const n = 200*bs + 5
	for _, workers := range []int{1, 4} {
		o := newBlockObject(n, bs)
		o.data[150*bs+7] ^= 1
		o.data[40*bs] ^= 1
		for _, tc := range []struct {
			off, end int64
			want     int64 // -1: no error
		}{
			{0, n, 40}, {41 * bs, n, 150}, {41 * bs, 150 * bs, -1}, {40*bs + 1, 40*bs + 2, 40}, {151 * bs, n, -1},
		} {
			dst := make([]byte, tc.end-tc.off)
			err := o.blocks(bs, 64*bs, workers).ReadRange(dst, tc.off)
			var m mismatch
			switch {
			case tc.want < 0 && err != nil:
				t.Fatalf("workers %d [%d, %d): %v", workers, tc.off, tc.end, err)
			case tc.want >= 0 && (!errors.As(err, &m) || m.block != tc.want):
				t.Fatalf("workers %d [%d, %d): %v, want block %d", workers, tc.off, tc.end, err, tc.want)
			}
		}
	}
}

// TestBlocksUnchecked reads with Want nil: damage goes unnoticed and the
// bytes are the stored ones.
func TestBlocksUnchecked(t *testing.T) {
	const bs = 4096
	o := newBlockObject(2<<20, bs)
	o.data[5] ^= 1
	b := o.blocks(bs, 1<<20, 3)
	b.Want = nil
	dst := make([]byte, len(o.data))
	if err := b.Read(0, dst); err != nil {
		t.Fatal(err)
	}
	if string(dst) != string(o.data) {
		t.Fatal("wrong bytes")
	}
}

// TestBlocksReadError stops at the first failed read and returns its
// error, not a mismatch, even with damaged blocks before it.
func TestBlocksReadError(t *testing.T) {
	const bs = 8192
	o := newBlockObject(4<<20, bs)
	o.data[0] ^= 1
	boom := errors.New("boom")
	b := o.blocks(bs, 1<<20, 2)
	read := b.ReadAt
	b.ReadAt = func(p []byte, off int64) error {
		if off >= 2<<20 {
			return boom
		}
		return read(p, off)
	}
	if err := b.Read(0, make([]byte, len(o.data))); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the read error", err)
	}
	for _, r := range o.reads {
		if r[0] >= 2<<20 {
			t.Fatalf("read %v after the failed one", r)
		}
	}
}
