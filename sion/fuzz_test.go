package sion

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/ftigo/ftigo/vfd"
)

// FuzzReader decodes arbitrary bytes as a single physical file. It must
// never panic; every failure must match one of the package's sentinels;
// whatever reads must read completely and re-write through the serial
// writer into a container that reads back the same.
func FuzzReader(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.sion*"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			for _, s := range []error{ErrBadMagic, ErrVersion, ErrTruncated, ErrUnclosed, ErrInconsistent, ErrTooLarge} {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("error matches no sentinel: %v", err)
		}
		n := r.NTasks()
		var total int64
		for _, tk := range r.Tasks() {
			total += tk.Size
		}
		if total > 64<<20 {
			return // legal but large (blocks may repeat ranges); not worth re-writing
		}
		chunks := make([]int64, n)
		streams := make([][]byte, n)
		for i := 0; i < n; i++ {
			b, err := r.ReadTask(i)
			if err != nil {
				t.Fatalf("task %d of a valid file: %v", i, err)
			}
			sr, _ := r.TaskReader(i)
			all, err := io.ReadAll(sr)
			if err != nil || !bytes.Equal(all, b) {
				t.Fatalf("task %d: Read and ReadAt disagree (%v)", i, err)
			}
			streams[i] = b
			chunks[i] = max(int64(len(b)), 1)
			if r.KeyVal() {
				_, _ = r.Records(i) // may fail with ErrBadRecord, must not panic
			}
		}
		if n > 64 {
			return
		}
		core := vfd.NewCore() // in memory: no fsync per input
		name := "re.sion"
		w, err := Create(core, name, chunks, nil, &Options{FSBlkSize: 64, ExactChunks: true})
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range streams {
			if _, err := w.Task(i).Write(b); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r2, err := Open(core, name)
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close()
		for i, b := range streams {
			got, err := r2.ReadTask(i)
			if err != nil || !bytes.Equal(got, b) {
				t.Fatalf("re-written task %d differs (%v)", i, err)
			}
		}
	})
}

// FuzzDecodePart decodes arbitrary bytes as a rank's part of a
// collective writer's plan (what rank 0 hands out). It must never panic:
// the result is a plan holding the rank's tasks, or an error matching
// ErrInconsistent, ErrBadArgument or ErrTooLarge.
func FuzzDecodePart(f *testing.F) {
	var spec []byte
	for r, c := range []int64{1000, 1500, 100, 3000} {
		spec = append(spec, encodeSpec(MappedTask{GlobalRank: int64(r), ChunkSize: c, File: r / 2, LocalRank: r % 2})...)
	}
	all := [][]byte{spec[:2*specLen], spec[2*specLen:]}
	parts, _ := planParts(vfd.NewCore(), "f.sion", all, 2, &Options{FSBlkSize: 1024}, trailerMapping)
	for _, p := range parts {
		f.Add(p, uint8(2))
	}
	bad, _ := planParts(vfd.NewCore(), "f.sion", [][]byte{spec[:specLen], spec[:specLen]}, 2, &Options{}, trailerMapping)
	f.Add(bad[0], uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, ntasks uint8) {
		pl, err := decodePart(b, int(ntasks%8), 3)
		if err != nil {
			if !errors.Is(err, ErrInconsistent) && !errors.Is(err, ErrBadArgument) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error %v matches no sentinel", err)
			}
			return
		}
		if len(pl.tasks) != int(ntasks%8) {
			t.Fatalf("%d tasks planned, want %d", len(pl.tasks), ntasks%8)
		}
		for _, lf := range pl.led {
			if lf.file < 0 || lf.file >= 3 || len(lf.chunks) != len(lf.ranks) {
				t.Fatalf("led file %+v", lf)
			}
		}
	})
}
