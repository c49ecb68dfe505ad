package vfd

import (
	"errors"
	"fmt"
	"math"
)

// OpenRead opens an existing file read-only.
func OpenRead(d Driver, name string) (File, error) { return d.Open(name, ReadOnly) }

// Create creates a new file for reading and writing; it fails with an error
// matching fs.ErrExist if the file exists.
func Create(d Driver, name string) (File, error) {
	return d.Open(name, ReadWrite|OCreate|OExcl)
}

// CreateTrunc creates a file, or truncates it if it exists.
func CreateTrunc(d Driver, name string) (File, error) {
	return d.Open(name, ReadWrite|OCreate|OTrunc)
}

// ReadFile reads a whole file, whatever its size; [ReadFileLimit] bounds
// what a caller is prepared to hold in memory.
func ReadFile(d Driver, name string) ([]byte, error) {
	return ReadFileLimit(d, name, math.MaxInt64)
}

// WriteFileAtomic writes data to name with the commit protocol used
// everywhere in ftigo: write name+".tmp", sync it, rename it over name,
// sync the directory (as [RenameDurable]). A crash at any point leaves
// either the old file or the new one, never a mix.
func WriteFileAtomic(d Driver, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := d.Open(tmp, ReadWrite|OCreate|OTrunc)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		return errors.Join(err, f.Close(), d.Remove(tmp))
	}
	if err := f.Sync(); err != nil {
		return errors.Join(err, f.Close(), d.Remove(tmp))
	}
	if err := f.Close(); err != nil {
		return errors.Join(err, d.Remove(tmp))
	}
	if err := d.Rename(tmp, name); err != nil {
		return errors.Join(err, d.Remove(tmp))
	}
	if err := syncRenamed(d, tmp, name); err != nil {
		return fmt.Errorf("sync dir of %s: %w", name, err)
	}
	return nil
}

// CopyFile copies src to dst through the drivers in pieces of bufSize
// bytes and syncs dst. dst is created or truncated.
func CopyFile(dst Driver, dstName string, src Driver, srcName string, bufSize int) (int64, error) {
	if bufSize <= 0 {
		bufSize = 1 << 20
	}
	in, err := src.Open(srcName, ReadOnly)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	size, err := in.Size()
	if err != nil {
		return 0, err
	}
	out, err := dst.Open(dstName, ReadWrite|OCreate|OTrunc)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, min(int64(bufSize), max(size, 1)))
	var off int64
	for off < size {
		n := min(int64(len(buf)), size-off)
		if err := ReadFull(in, buf[:n], off); err != nil {
			return off, errors.Join(pathErr("read", srcName, err), out.Close())
		}
		if _, err := out.WriteAt(buf[:n], off); err != nil {
			return off, errors.Join(err, out.Close())
		}
		off += n
	}
	if err := out.Sync(); err != nil {
		return off, errors.Join(err, out.Close())
	}
	return off, out.Close()
}
