package fileformat

import (
	"io"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/zeebo/blake3"
)

// TestBlockHashIsBLAKE3 checks the SIMD block hash against the format's
// reference BLAKE3 implementation at every size where the SIMD code
// changes its path (one chunk of 1 KiB, 8 and 16 chunks per batch, partial
// last chunks and blocks), on data that differs at every offset.
func TestBlockHashIsBLAKE3(t *testing.T) {
	data := make([]byte, 4<<20+3)
	x := uint32(2463534242)
	for i := range data {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		data[i] = byte(x)
	}
	sizes := []int{48 << 10, 128 << 10, 256 << 10, 512 << 10, 2 << 20, 0, 1, 63, 64, 65, 1023, 1024, 1025, 2047, 2048, 4096, 7 << 10, 8 << 10, 8<<10 + 1,
		15 << 10, 16<<10 - 1, 16 << 10, 16<<10 + 1, 17 << 10, 32 << 10, 64<<10 - 7, 64 << 10, 64<<10 + 1,
		1 << 20, 1<<20 + 1000, 4 << 20, len(data)}
	for _, n := range sizes {
		for _, off := range []int{0, 1, 3} {
			if off+n > len(data) {
				continue
			}
			p := data[off : off+n]
			if got, want := BlockHash(p), blake3.Sum256(p); got != want {
				t.Fatalf("BlockHash of %d bytes at offset %d = %x, BLAKE3 = %x", n, off, got, want)
			}
		}
	}
	// HashBlocks over a length that ends in a partial block, with and
	// without workers, agrees with the reference hash of every block.
	for _, workers := range []int{1, 3} {
		const bs = 64 << 10
		got, err := HashBlocks(data, bs, WithHashWorkers(workers))
		if err != nil {
			t.Fatal(err)
		}
		if want := (len(data) + bs - 1) / bs; len(got) != want {
			t.Fatalf("workers %d: %d block hashes, want %d", workers, len(got), want)
		}
		for i := range got {
			if want := blake3.Sum256(data[i*bs : min((i+1)*bs, len(data))]); got[i] != want {
				t.Fatalf("workers %d: block %d hash %x, want %x", workers, i, got[i], want)
			}
		}
	}
}

// TestWriterHashYields: the FTI-FF writer's hash workers give up their
// processor every MiB (runtime.Gosched), so that another goroutine, such
// as a writer back from a write, runs while the hashing goes on instead
// of waiting for the scheduler to preempt them (every 10 ms). With one
// processor and a file that takes no system call, a goroutine that counts
// its turns and yields after each gets about one turn per MiB hashed:
// about 32 while 32 MiB are written and hashed. Without the yields it
// runs once when the writer waits for the hashing, and then only when a
// preemption falls (none or one in the ~12 ms the hashing takes here).
// The other users of hashBlocks (readers, verifiers) do not yield.
func TestWriterHashYields(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	data := pattern(32<<20, 9)
	turns := func(run func()) int64 {
		var n atomic.Int64
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			for !stop.Load() {
				n.Add(1)
				runtime.Gosched()
			}
		}()
		runtime.Gosched() // let it start
		n.Store(0)
		run()
		got := n.Load()
		stop.Store(true)
		<-done
		return got
	}
	got := turns(func() {
		_, _, err := Write(&sinkFile{}, Meta{}, []Var{{ID: 1, Type: Bytes, Data: data}}, nil, WithHashWorkers(1))
		assert.NoError(t, err)
	})
	assert.GreaterOrEqual(t, got, int64(16), "turns of another goroutine while the writer hashed 32 MiB")
	out := make([][HashSize]byte, numBlocks(int64(len(data)), DefaultBlockSize))
	var took time.Duration
	plain := turns(func() {
		start := time.Now()
		hashBlocks(data, DefaultBlockSize, out, 1)
		took = time.Since(start)
	})
	// The control: without the yields only preemptions (one per 10 ms)
	// give the other goroutine a turn. On a machine so loaded that the
	// hashing took over 100 ms of wall time, preemptions alone may add up
	// to 16 turns, so the control is only asserted below that.
	if took < 100*time.Millisecond {
		assert.Less(t, plain, int64(16), "turns while hashBlocks hashed 32 MiB in %v", took)
	} else {
		t.Logf("control not asserted: hashBlocks took %v (loaded machine); %d turns", took, plain)
	}
}

// sinkFile is a vfd.File that keeps nothing and makes no system call.
type sinkFile struct{ size int64 }

func (f *sinkFile) Name() string                      { return "sink" }
func (f *sinkFile) ReadAt([]byte, int64) (int, error) { return 0, io.EOF }
func (f *sinkFile) WriteAt(p []byte, off int64) (int, error) {
	f.size = max(f.size, off+int64(len(p)))
	return len(p), nil
}
func (f *sinkFile) Size() (int64, error)   { return f.size, nil }
func (f *sinkFile) Truncate(n int64) error { f.size = n; return nil }
func (f *sinkFile) Sync() error            { return nil }
func (f *sinkFile) Close() error           { return nil }
