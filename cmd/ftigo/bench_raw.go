package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ftigo/ftigo/vfd"
)

// rawWrite is the plain raw reference of a checkpoint: every rank writes
// its data copies times into one file from the application's memory, in
// 4 MiB writes, and fsyncs it; then the directory is synced.
func rawWrite(bc benchConfig, data [][]float64, dir string, copies int64) (time.Duration, cpuTimes, error) {
	d := vfd.Sec2{}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return 0, cpuTimes{}, err
	}
	defer d.RemoveAll(dir)
	t0, c0 := time.Now(), processCPU()
	err := parallel(bc.ranks, func(r int) error {
		f, err := vfd.CreateTrunc(d, filepath.Join(dir, fmt.Sprintf("raw%04d", r)))
		if err != nil {
			return err
		}
		src := bytesOf(data[r])
		const piece = 4 << 20
		for c := range copies {
			base := c * int64(len(src))
			for off := 0; off < len(src); off += piece {
				if _, err := f.WriteAt(src[off:min(off+piece, len(src))], base+int64(off)); err != nil {
					return errors.Join(err, f.Close())
				}
			}
		}
		return errors.Join(f.Sync(), f.Close())
	})
	if err == nil {
		err = d.SyncDir(dir)
	}
	return time.Since(t0), processCPU().sub(c0), err
}

// strongTimes are the strongest raw references of one repeat.
type strongTimes struct {
	write, read, rebuild          time.Duration
	writeCPU, readCPU, rebuildCPU cpuTimes
}

// strongPiece is the write size of the strongest raw writer, after which
// it starts the writeback (fileformat's writebackPiece).
const strongPiece = 16 << 20

// writeStrong writes src to a new file name in strongPiece writes, each
// followed by a writeback hint, and returns the function that syncs and
// closes it.
func writeStrong(name string, src []byte) (func() error, error) {
	f, err := vfd.CreateTrunc(vfd.Sec2{}, name)
	if err != nil {
		return nil, err
	}
	if err := writePieces(f, src, 0); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error { return errors.Join(f.Sync(), f.Close()) }, nil
}

// writePieces writes src into f at base in strongPiece writes, each
// followed by a writeback hint: the strong writer's pattern.
func writePieces(f vfd.File, src []byte, base int64) error {
	for off := 0; off < len(src); off += strongPiece {
		end := min(off+strongPiece, len(src))
		if _, err := f.WriteAt(src[off:end], base+int64(off)); err != nil {
			return err
		}
		if err := vfd.StartWriteback(f, base+int64(off), int64(end-off)); err != nil {
			return err
		}
	}
	return nil
}

// writeFilesStrong writes src to every file of names, each file's fsync
// running while the next is written.
func writeFilesStrong(names []string, src []byte) error {
	var syncs []chan error
	var errs []error
	for _, name := range names {
		sync, err := writeStrong(name, src)
		if err != nil {
			errs = append(errs, err)
			break
		}
		done := make(chan error, 1)
		go func() { done <- sync() }()
		syncs = append(syncs, done)
	}
	for _, d := range syncs {
		errs = append(errs, <-d)
	}
	return errors.Join(errs...)
}

// strongShared measures the strong writer into one shared file, as the
// L4 container is written: the file is created with a 4 KiB head (the
// container's META1 block), every rank then opens it, writes its data at
// its task's offset (tasks rounded up to 4 KiB) in strongPiece writes,
// each followed by a writeback hint, and fsyncs it; then the directory
// is synced. No metadata is written: only the data's placement differs
// from [strongRaw]'s checkpoint writer.
func strongShared(bc benchConfig, data [][]float64, dir string) (time.Duration, cpuTimes, error) {
	d := vfd.Sec2{}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return 0, cpuTimes{}, err
	}
	defer d.RemoveAll(dir)
	const blk = 4096
	name := filepath.Join(dir, "shared")
	t0, c0 := time.Now(), processCPU()
	f, err := vfd.CreateTrunc(d, name)
	if err == nil {
		_, err = f.WriteAt(make([]byte, blk), 0)
		err = errors.Join(err, f.Close())
	}
	if err == nil {
		err = parallel(bc.ranks, func(r int) error {
			src := bytesOf(data[r])
			task := (int64(len(src)) + blk - 1) / blk * blk
			return writeStrongAt(d, name, src, blk+int64(r)*task)
		})
	}
	if err == nil {
		err = d.SyncDir(dir)
	}
	return time.Since(t0), processCPU().sub(c0), err
}

// writeStrongAt writes src into the existing file name at base as
// [writeStrong] does (strongPiece writes, each followed by a writeback
// hint), then syncs and closes it.
func writeStrongAt(d vfd.Driver, name string, src []byte, base int64) error {
	f, err := d.Open(name, vfd.ReadWrite)
	if err != nil {
		return err
	}
	if err := writePieces(f, src, base); err != nil {
		return errors.Join(err, f.Close())
	}
	return errors.Join(f.Sync(), f.Close())
}

// strongRaw measures the strongest raw references of level: the
// strongest raw writer of the checkpoint's bytes (every rank writes its
// data once per persisted copy, one file each), the raw read of the
// data back into dst by every rank, and the raw write of what the
// level's restart rebuilds by the ranks that lost it.
func strongRaw(bc benchConfig, data, dst [][]float64, level int, dir string) (strongTimes, error) {
	var m strongTimes
	d := vfd.Sec2{}
	if err := d.MkdirAll(dir, 0o755); err != nil {
		return m, err
	}
	defer d.RemoveAll(dir)
	name := func(r int, copy int64) string { return filepath.Join(dir, fmt.Sprintf("raw%04d-%d", r, copy)) }
	names := func(r int, n int64, tag string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = name(r, int64(i)) + tag
		}
		return out
	}
	t0, c0 := time.Now(), processCPU()
	err := parallel(bc.ranks, func(r int) error {
		return writeFilesStrong(names(r, persistFactor[level], ""), bytesOf(data[r]))
	})
	if err == nil {
		err = d.SyncDir(dir)
	}
	m.write, m.writeCPU = time.Since(t0), processCPU().sub(c0)
	if err != nil {
		return m, err
	}
	if bc.cold {
		if err := bc.drop(); err != nil {
			return m, fmt.Errorf("drop the page cache: %w", err)
		}
	}
	t0, c0 = time.Now(), processCPU()
	err = parallel(bc.ranks, func(r int) error {
		f, err := vfd.OpenRead(d, name(r, 0))
		if err != nil {
			return err
		}
		return errors.Join(vfd.ReadFull(f, bytesOf(dst[r]), 0), f.Close())
	})
	m.read, m.readCPU = time.Since(t0), processCPU().sub(c0)
	if err != nil {
		return m, err
	}
	lostRanks := lost(level, bc.ranks)
	if len(lostRanks) == 0 {
		return m, nil
	}
	t0, c0 = time.Now(), processCPU()
	err = parallel(len(lostRanks), func(i int) error {
		r := lostRanks[i]
		return writeFilesStrong(names(r, 2, ".rebuilt"), bytesOf(data[r]))
	})
	if err == nil {
		err = d.SyncDir(dir)
	}
	m.rebuild, m.rebuildCPU = time.Since(t0), processCPU().sub(c0)
	return m, err
}
