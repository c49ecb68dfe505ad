package vfd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
)

// Family spreads one address space over member files of a fixed size,
// named by a printf pattern with one integer verb ("data-%05d.bin"),
// through an underlying driver, as HDF5's family driver does. Member i
// holds bytes [i*size, (i+1)*size) of the address space; every member but
// the last is exactly the member size (sparse where nothing was written),
// so the members are plain slices of the file and a family written here
// opens with libhdf5's family driver and the other way round.
//
// File names given to Open, Remove, RemoveAll, Rename and Stat that
// contain a '%' are patterns and act on the whole family; other names
// (directories, plain files) and ReadDir, MkdirAll, SyncDir go to the
// underlying driver unchanged.
type Family struct {
	inner      Driver
	memberSize int64
}

// NewFamily returns a family driver over inner. memberSize is the member
// size for new families; when an existing family is opened its member
// size is discovered from its members (0 means: always discover, and use
// 1 GiB for new families).
func NewFamily(inner Driver, memberSize int64) *Family {
	return &Family{inner: inner, memberSize: memberSize}
}

// DefaultFamilyMemberSize is the member size of new families when none is
// configured.
const DefaultFamilyMemberSize = 1 << 30

// Name returns "family".
func (d *Family) Name() string { return "family" }

// Inner returns the underlying driver.
func (d *Family) Inner() Driver { return d.inner }

func isPattern(name string) bool { return strings.Contains(path.Base(name), "%") }

// memberName formats the i-th member name, checking that the pattern has
// exactly one integer verb.
func memberName(pattern string, i int) (string, error) {
	a, b := fmt.Sprintf(pattern, i), fmt.Sprintf(pattern, i+1)
	if a == b || strings.Contains(a, "%!") {
		return "", fmt.Errorf("family name %q: %w: needs exactly one integer verb such as %%05d", pattern, fs.ErrInvalid)
	}
	return a, nil
}

// members stats members 0, 1, ... until one is missing and returns their sizes.
func (d *Family) members(pattern string) ([]int64, error) {
	var sizes []int64
	for i := 0; ; i++ {
		name, err := memberName(pattern, i)
		if err != nil {
			return nil, err
		}
		info, err := d.inner.Stat(name)
		if errors.Is(err, fs.ErrNotExist) {
			return sizes, nil
		}
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, info.Size())
	}
}

// memberSizeOf checks an existing family and returns its member size.
func (d *Family) memberSizeOf(pattern string, sizes []int64) (int64, error) {
	ms := sizes[0]
	if len(sizes) == 1 {
		ms = max(ms, d.memberSize)
		if ms == 0 {
			ms = DefaultFamilyMemberSize
		}
		return ms, nil
	}
	for i, s := range sizes[:len(sizes)-1] {
		if s != ms {
			name, _ := memberName(pattern, i)
			return 0, fmt.Errorf("family %s: member %s has %d bytes, member 0 has %d: %w", pattern, name, s, ms, ErrFamilyMismatch)
		}
	}
	if last := sizes[len(sizes)-1]; last > ms {
		name, _ := memberName(pattern, len(sizes)-1)
		return 0, fmt.Errorf("family %s: last member %s has %d bytes, more than the member size %d: %w", pattern, name, last, ms, ErrFamilyMismatch)
	}
	return ms, nil
}

// Open opens or creates the family named by pattern.
func (d *Family) Open(pattern string, flag Flag) (File, error) {
	if _, err := memberName(pattern, 0); err != nil {
		return nil, pathErr("open", pattern, err)
	}
	sizes, err := d.members(pattern)
	if err != nil {
		return nil, pathErr("open", pattern, err)
	}
	switch {
	case len(sizes) == 0 && flag&OCreate == 0:
		return nil, pathErr("open", pattern, fs.ErrNotExist)
	case len(sizes) > 0 && flag&(OCreate|OExcl) == OCreate|OExcl:
		return nil, pathErr("open", pattern, fs.ErrExist)
	case len(sizes) > 0 && flag&OTrunc != 0:
		if !flag.Writable() {
			return nil, pathErr("open", pattern, ErrReadOnly)
		}
		if err := d.removeMembers(pattern, 1); err != nil {
			return nil, err
		}
		sizes = sizes[:1]
	}
	ms := d.memberSize
	if ms <= 0 {
		ms = DefaultFamilyMemberSize
	}
	if len(sizes) > 0 && flag&OTrunc == 0 {
		if ms, err = d.memberSizeOf(pattern, sizes); err != nil {
			return nil, pathErr("open", pattern, err)
		}
	}
	f := &FamilyFile{d: d, pattern: pattern, flag: flag, memberSize: ms}
	n := max(len(sizes), 1)
	for i := range n {
		if err := f.addMember(i, flag); err != nil {
			return nil, errors.Join(err, f.closeMembers())
		}
	}
	return f, nil
}

// removeMembers removes members from, from+1, ... that exist.
func (d *Family) removeMembers(pattern string, from int) error {
	for i := from; ; i++ {
		name, err := memberName(pattern, i)
		if err != nil {
			return pathErr("remove", pattern, err)
		}
		err = d.inner.Remove(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Remove removes every member of a family, or a plain name.
func (d *Family) Remove(name string) error {
	if !isPattern(name) {
		return d.inner.Remove(name)
	}
	first, err := memberName(name, 0)
	if err != nil {
		return pathErr("remove", name, err)
	}
	if err := d.inner.Remove(first); err != nil {
		return err
	}
	return d.removeMembers(name, 1)
}

// RemoveAll removes every member of a family, or a plain name and
// everything under it.
func (d *Family) RemoveAll(name string) error {
	if !isPattern(name) {
		return d.inner.RemoveAll(name)
	}
	return d.removeMembers(name, 0)
}

// Rename renames every member of the family oldname to the pattern
// newname, replacing the family there (its extra members are removed).
func (d *Family) Rename(oldname, newname string) error {
	if !isPattern(oldname) && !isPattern(newname) {
		return d.inner.Rename(oldname, newname)
	}
	sizes, err := d.members(oldname)
	if err != nil {
		return pathErr("rename", oldname, err)
	}
	if len(sizes) == 0 {
		return pathErr("rename", oldname, fs.ErrNotExist)
	}
	if _, err := memberName(newname, 0); err != nil {
		return pathErr("rename", newname, err)
	}
	if err := d.removeMembers(newname, len(sizes)); err != nil {
		return err
	}
	for i := range sizes {
		o, _ := memberName(oldname, i)
		n, _ := memberName(newname, i)
		if err := d.inner.Rename(o, n); err != nil {
			return err
		}
	}
	return nil
}

// Stat describes a family (its size is the size of the address space) or
// a plain name.
func (d *Family) Stat(name string) (fs.FileInfo, error) {
	if !isPattern(name) {
		return d.inner.Stat(name)
	}
	sizes, err := d.members(name)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	if len(sizes) == 0 {
		return nil, pathErr("stat", name, fs.ErrNotExist)
	}
	first, _ := memberName(name, 0)
	info, err := d.inner.Stat(first)
	if err != nil {
		return nil, err
	}
	ms, err := d.memberSizeOf(name, sizes)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	return coreInfo{name: path.Base(name), size: int64(len(sizes)-1)*ms + sizes[len(sizes)-1], mode: info.Mode(), mod: info.ModTime()}, nil
}

// ReadDir lists a directory of the underlying driver (members appear as
// themselves).
func (d *Family) ReadDir(name string) ([]fs.DirEntry, error) { return d.inner.ReadDir(name) }

// MkdirAll creates directories in the underlying driver.
func (d *Family) MkdirAll(name string, perm fs.FileMode) error { return d.inner.MkdirAll(name, perm) }

// SyncDir syncs a directory of the underlying driver.
func (d *Family) SyncDir(name string) error { return d.inner.SyncDir(name) }

// FamilyFile is an open family: one address space over its members.
type FamilyFile struct {
	d          *Family
	pattern    string
	flag       Flag
	memberSize int64

	mu      sync.RWMutex // guards members (the slice; the files do their own locking)
	members []File
	closed  bool
}

// MemberSize returns the member size in use (discovered for an existing
// family).
func (f *FamilyFile) MemberSize() int64 { return f.memberSize }

// Members returns the number of member files.
func (f *FamilyFile) Members() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.members)
}

// Name returns the pattern the family was opened with.
func (f *FamilyFile) Name() string { return f.pattern }

// addMember opens member i (== len(members)); f.mu must be held or f
// not yet shared.
func (f *FamilyFile) addMember(i int, flag Flag) error {
	name, err := memberName(f.pattern, i)
	if err != nil {
		return pathErr("open", f.pattern, err)
	}
	if i > 0 {
		flag &^= OTrunc | OExcl
	}
	m, err := f.d.inner.Open(name, flag)
	if err != nil {
		return err
	}
	f.members = append(f.members, m)
	return nil
}

// grow makes members up to index last exist, extending every member
// before the new last one to the full member size.
func (f *FamilyFile) grow(last int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("write", f.pattern, ErrClosed)
	}
	for len(f.members) <= last {
		if err := f.members[len(f.members)-1].Truncate(f.memberSize); err != nil {
			return err
		}
		if err := f.addMember(len(f.members), (f.flag&^(OExcl|OTrunc))|OCreate|ReadWrite); err != nil {
			return err
		}
	}
	return nil
}

func (f *FamilyFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", f.pattern, ErrNegativeOffset)
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("read", f.pattern, ErrClosed)
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		i, moff := int(pos/f.memberSize), pos%f.memberSize
		if i >= len(f.members) {
			return done, io.EOF
		}
		chunk := p[done:min(len(p), done+int(f.memberSize-moff))]
		n, err := f.members[i].ReadAt(chunk, moff)
		done += n
		if err == io.EOF && i < len(f.members)-1 {
			// A short member before the last: a hole up to the member size.
			clear(chunk[n:])
			done += len(chunk) - n
			continue
		}
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

func (f *FamilyFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("write", f.pattern, ErrNegativeOffset)
	}
	if !f.flag.Writable() {
		return 0, pathErr("write", f.pattern, ErrReadOnly)
	}
	if len(p) > 0 {
		last := int((off + int64(len(p)) - 1) / f.memberSize)
		f.mu.RLock()
		have, closed := len(f.members), f.closed
		f.mu.RUnlock()
		if closed {
			return 0, pathErr("write", f.pattern, ErrClosed)
		}
		if last >= have {
			if err := f.grow(last); err != nil {
				return 0, err
			}
		}
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("write", f.pattern, ErrClosed)
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		i, moff := int(pos/f.memberSize), pos%f.memberSize
		chunk := p[done:min(len(p), done+int(f.memberSize-moff))]
		n, err := f.members[i].WriteAt(chunk, moff)
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// StartWriteback passes the hint on to the members the range covers,
// each with its part of the range; members past the end are skipped.
func (f *FamilyFile) StartWriteback(off, n int64) error {
	if err := checkWritebackRange(f.pattern, off, n); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("writeback", f.pattern, ErrClosed)
	}
	end := writebackEnd(off, n)
	for i := off / f.memberSize; i < int64(len(f.members)) && i*f.memberSize < end; i++ {
		base := i * f.memberSize
		moff := max(off, base) - base
		mn := min(end-base, f.memberSize) - moff
		if err := StartWriteback(f.members[i], moff, mn); err != nil {
			return err
		}
	}
	return nil
}

// DropCache passes the hint on to the members the range covers, each
// with its part of the range; members past the end are skipped.
func (f *FamilyFile) DropCache(off, n int64) error {
	if err := checkDropRange(f.pattern, off, n); err != nil {
		return err
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("dropcache", f.pattern, ErrClosed)
	}
	end := writebackEnd(off, n)
	for i := off / f.memberSize; i < int64(len(f.members)) && i*f.memberSize < end; i++ {
		base := i * f.memberSize
		moff := max(off, base) - base
		mn := min(end-base, f.memberSize) - moff
		if err := DropCache(f.members[i], moff, mn); err != nil {
			return err
		}
	}
	return nil
}

// Size returns the size of the address space: full members plus the last.
func (f *FamilyFile) Size() (int64, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return 0, pathErr("stat", f.pattern, ErrClosed)
	}
	last, err := f.members[len(f.members)-1].Size()
	if err != nil {
		return 0, err
	}
	return int64(len(f.members)-1)*f.memberSize + last, nil
}

// Truncate sets the size of the address space, removing members past it.
func (f *FamilyFile) Truncate(size int64) error {
	if size < 0 {
		return pathErr("truncate", f.pattern, ErrNegativeOffset)
	}
	if !f.flag.Writable() {
		return pathErr("truncate", f.pattern, ErrReadOnly)
	}
	n := max(int((size+f.memberSize-1)/f.memberSize), 1)
	if err := f.grow(n - 1); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.members) > n {
		i := len(f.members) - 1
		name := f.members[i].Name()
		if err := f.members[i].Close(); err != nil {
			return err
		}
		f.members = f.members[:i]
		if err := f.d.inner.Remove(name); err != nil {
			return err
		}
	}
	for i, m := range f.members {
		want := f.memberSize
		if i == n-1 {
			want = size - int64(n-1)*f.memberSize
		}
		if err := m.Truncate(want); err != nil {
			return err
		}
	}
	return nil
}

// Sync syncs every member.
func (f *FamilyFile) Sync() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.closed {
		return pathErr("sync", f.pattern, ErrClosed)
	}
	for _, m := range f.members {
		if err := m.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every member.
func (f *FamilyFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return pathErr("close", f.pattern, ErrClosed)
	}
	f.closed = true
	return f.closeMembers()
}

func (f *FamilyFile) closeMembers() error {
	var errs []error
	for _, m := range f.members {
		errs = append(errs, m.Close())
	}
	return errors.Join(errs...)
}
