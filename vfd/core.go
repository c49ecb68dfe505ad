package vfd

import (
	"errors"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// CoreOption configures a [Core] driver.
type CoreOption func(*coreConfig)

type coreConfig struct {
	backing    Driver
	backingDir string
	now        func() time.Time
}

// WithBacking gives every core file a backing store: on Sync and on Close
// of a writable handle, the file's whole image is written to
// path.Join(dir, name) through d (created or truncated, then synced), as
// HDF5's core driver does with a backing store. Opening a name that is
// not in memory loads it from the backing store when it exists there.
// The image is written under the name the file was opened with.
func WithBacking(d Driver, dir string) CoreOption {
	return func(c *coreConfig) { c.backing, c.backingDir = d, dir }
}

// WithCoreClock sets the clock used for modification times (default
// time.Now).
func WithCoreClock(now func() time.Time) CoreOption {
	return func(c *coreConfig) { c.now = now }
}

// Core is an in-memory driver: a complete namespace of directories and
// files held in memory, safe for concurrent use. It simulates power loss:
// every file keeps its current bytes and the bytes it had at its last
// Sync, and every directory keeps its current entries and the entries it
// had at its last SyncDir; [Core.CrashClone] returns what a power cut
// would leave.
//
// Names are slash-separated; "/a/b", "a/b" and "./a/b" are the same file,
// and ".." cannot climb above the root. The root directory always exists.
type Core struct {
	cfg  coreConfig
	mu   sync.Mutex // guards the namespace: every dir node's kids and syncedKids
	root *coreNode

	lockMu sync.Mutex      // guards locks
	locks  map[string]bool // names held through Lock
}

// coreNode is one inode: a directory or a file. A node stays alive while
// an open handle or a (current or synced) directory entry refers to it.
type coreNode struct {
	dir bool

	// Directories; guarded by Core.mu.
	kids       map[string]*coreNode
	syncedKids map[string]*coreNode
	// changed names every entry of kids set or removed since the last
	// SyncDir: SyncDir costs the changes, not the directory's size.
	changed map[string]struct{}

	// Files; guarded by mu.
	mu      sync.RWMutex
	data    coreImage // current bytes
	synced  coreImage // bytes at the last Sync
	modTime time.Time
}

// NewCore returns an empty in-memory driver.
func NewCore(opts ...CoreOption) *Core {
	c := &Core{cfg: coreConfig{now: time.Now}}
	for _, o := range opts {
		o(&c.cfg)
	}
	if c.cfg.now == nil {
		c.cfg.now = time.Now
	}
	c.root = c.newDir()
	return c
}

func (c *Core) newDir() *coreNode {
	return &coreNode{dir: true, kids: map[string]*coreNode{}, syncedKids: map[string]*coreNode{}, modTime: c.cfg.now()}
}

// Name returns "core".
func (c *Core) Name() string { return "core" }

// splitPath cleans name into its components; the root is no components.
func splitPath(name string) []string {
	p := strings.TrimPrefix(path.Clean("/"+name), "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// walk returns the node at parts; c.mu must be held.
func (c *Core) walk(parts []string) (*coreNode, error) {
	n := c.root
	for _, p := range parts {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		k, ok := n.kids[p]
		if !ok {
			return nil, fs.ErrNotExist
		}
		n = k
	}
	return n, nil
}

// parent returns the directory holding parts and the last component;
// c.mu must be held. parts must not be the root.
func (c *Core) parent(parts []string) (*coreNode, string, error) {
	d, err := c.walk(parts[:len(parts)-1])
	if err != nil {
		return nil, "", err
	}
	if !d.dir {
		return nil, "", syscall.ENOTDIR
	}
	return d, parts[len(parts)-1], nil
}

// Open opens or creates name.
func (c *Core) Open(name string, flag Flag) (File, error) {
	parts := splitPath(name)
	if len(parts) == 0 {
		return nil, pathErr("open", name, syscall.EISDIR)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d, base, err := c.parent(parts)
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	n, ok := d.kids[base]
	if !ok && c.cfg.backing != nil {
		if n, err = c.loadBacking(name); err != nil {
			return nil, err
		}
		if n != nil {
			d.kids[base], d.syncedKids[base], ok = n, n, true
		}
	}
	switch {
	case !ok:
		if flag&OCreate == 0 {
			return nil, pathErr("open", name, fs.ErrNotExist)
		}
		n = &coreNode{modTime: c.cfg.now()}
		d.setKid(base, n)
	case n.dir:
		return nil, pathErr("open", name, syscall.EISDIR)
	case flag&(OCreate|OExcl) == OCreate|OExcl:
		return nil, pathErr("open", name, fs.ErrExist)
	case flag&OTrunc != 0:
		if !flag.Writable() {
			return nil, pathErr("open", name, ErrReadOnly)
		}
		n.mu.Lock()
		n.data.truncate(0)
		n.modTime = c.cfg.now()
		n.mu.Unlock()
	}
	return &coreFile{c: c, n: n, name: name, flag: flag}, nil
}

// loadBacking reads name from the backing store; a missing file is nil, nil.
func (c *Core) loadBacking(name string) (*coreNode, error) {
	data, err := ReadFile(c.cfg.backing, path.Join(c.cfg.backingDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, pathErr("open", name, err)
	}
	n := &coreNode{data: imageOf(data), modTime: c.cfg.now()}
	n.synced = n.data.freeze()
	return n, nil
}

// Remove removes a file or an empty directory.
func (c *Core) Remove(name string) error {
	parts := splitPath(name)
	if len(parts) == 0 {
		return pathErr("remove", name, syscall.EBUSY)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d, base, err := c.parent(parts)
	if err != nil {
		return pathErr("remove", name, err)
	}
	n, ok := d.kids[base]
	if !ok {
		return pathErr("remove", name, fs.ErrNotExist)
	}
	if n.dir && len(n.kids) > 0 {
		return pathErr("remove", name, syscall.ENOTEMPTY)
	}
	d.delKid(base)
	return nil
}

// RemoveAll removes name and everything under it; a missing name is not
// an error. RemoveAll of the root empties it.
func (c *Core) RemoveAll(name string) error {
	parts := splitPath(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(parts) == 0 {
		for k := range c.root.kids {
			c.root.delKid(k)
		}
		return nil
	}
	d, base, err := c.parent(parts)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return pathErr("removeall", name, err)
	}
	d.delKid(base)
	return nil
}

// Rename moves oldname to newname, replacing a file (or an empty
// directory when oldname is a directory) at newname.
func (c *Core) Rename(oldname, newname string) error {
	op, np := splitPath(oldname), splitPath(newname)
	lerr := func(err error) error { return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err} }
	if len(op) == 0 || len(np) == 0 {
		return lerr(syscall.EBUSY)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	od, obase, err := c.parent(op)
	if err != nil {
		return lerr(err)
	}
	n, ok := od.kids[obase]
	if !ok {
		return lerr(fs.ErrNotExist)
	}
	nd, nbase, err := c.parent(np)
	if err != nil {
		return lerr(err)
	}
	if n.dir && len(np) > len(op) && slices.Equal(np[:len(op)], op) {
		return lerr(syscall.EINVAL) // into its own subtree
	}
	if old, ok := nd.kids[nbase]; ok {
		switch {
		case old == n:
			return nil
		case n.dir && !old.dir:
			return lerr(syscall.ENOTDIR)
		case !n.dir && old.dir:
			return lerr(syscall.EISDIR)
		case old.dir && len(old.kids) > 0:
			return lerr(syscall.ENOTEMPTY)
		}
	}
	od.delKid(obase)
	nd.setKid(nbase, n)
	return nil
}

// Stat describes name.
func (c *Core) Stat(name string) (fs.FileInfo, error) {
	parts := splitPath(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.walk(parts)
	if err != nil {
		return nil, pathErr("stat", name, err)
	}
	base := "/"
	if len(parts) > 0 {
		base = parts[len(parts)-1]
	}
	return n.info(base), nil
}

func (n *coreNode) info(name string) fs.FileInfo {
	if n.dir {
		return coreInfo{name: name, mode: fs.ModeDir | 0o755, mod: n.modTime}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return coreInfo{name: name, size: n.data.size, mode: 0o644, mod: n.modTime}
}

// ReadDir lists a directory sorted by name.
func (c *Core) ReadDir(name string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.walk(splitPath(name))
	if err != nil {
		return nil, pathErr("readdir", name, err)
	}
	if !n.dir {
		return nil, pathErr("readdir", name, syscall.ENOTDIR)
	}
	names := slices.Sorted(maps.Keys(n.kids))
	ents := make([]fs.DirEntry, len(names))
	for i, k := range names {
		ents[i] = fs.FileInfoToDirEntry(n.kids[k].info(k))
	}
	return ents, nil
}

// MkdirAll creates a directory and any missing parents. A new directory
// is durable once its parent directory is synced with SyncDir.
func (c *Core) MkdirAll(name string, perm fs.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.root
	for _, p := range splitPath(name) {
		k, ok := n.kids[p]
		if !ok {
			k = c.newDir()
			n.setKid(p, k)
		}
		if !k.dir {
			return pathErr("mkdir", name, syscall.ENOTDIR)
		}
		n = k
	}
	return nil
}

// SyncDir makes the directory's current entries durable: after it, a
// crash clone holds exactly these names (each with its file's synced
// bytes, or its directory's synced entries).
func (c *Core) SyncDir(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.walk(splitPath(name))
	if err != nil {
		return pathErr("syncdir", name, err)
	}
	if !n.dir {
		return pathErr("syncdir", name, syscall.ENOTDIR)
	}
	for k := range n.changed {
		if kid, ok := n.kids[k]; ok {
			n.syncedKids[k] = kid
		} else {
			delete(n.syncedKids, k)
		}
	}
	n.changed = nil
	return nil
}

// setKid sets directory d's entry name to k; Core.mu must be held.
func (d *coreNode) setKid(name string, k *coreNode) {
	d.kids[name] = k
	d.note(name)
}

// delKid removes directory d's entry name; Core.mu must be held.
func (d *coreNode) delKid(name string) {
	delete(d.kids, name)
	d.note(name)
}

// note records that directory d's entry name changed.
func (d *coreNode) note(name string) {
	if d.changed == nil {
		d.changed = map[string]struct{}{}
	}
	d.changed[name] = struct{}{}
}

// CrashClone returns a new Core holding only what a power cut at this
// instant would leave: starting from the root, every directory holds its
// entries as of its last SyncDir, each file its bytes as of its last
// Sync. A file created (or renamed) without a later SyncDir of its
// directory is gone (or back under its old name); a file never synced
// is empty; a directory is there only if its parent was synced after
// its creation. The clone has the receiver's clock but no backing store.
// The receiver is unchanged and may go on being used.
func (c *Core) CrashClone() *Core { return c.CrashCloneWith(CrashOptions{}) }

// CrashOptions lets a simulated crash keep some unsynced data, as a real
// device may have written some of it before the power went: pebble's
// and the spec's torn-write model, at page granularity.
type CrashOptions struct {
	// Rand draws what survives; nil keeps nothing unsynced.
	Rand *rand.Rand
	// UnsyncedPages is the probability that a page of a durable file
	// written since its last Sync reached the device anyway, and that a
	// changed file size did. Each page is all old or all new (64 KiB).
	UnsyncedPages float64
}

// CrashCloneWith is [Core.CrashClone] with part of the unsynced data of
// durable files kept as o says. Directory entries follow the same rule
// as CrashClone. With the same seed and the same history the result is
// the same.
func (c *Core) CrashCloneWith(o CrashOptions) *Core {
	c.mu.Lock()
	defer c.mu.Unlock()
	nc := &Core{cfg: coreConfig{now: c.cfg.now}}
	nc.root = c.cloneDurable(c.root, o)
	return nc
}

func (c *Core) cloneDurable(d *coreNode, o CrashOptions) *coreNode {
	nd := &coreNode{dir: true, kids: make(map[string]*coreNode, len(d.syncedKids)), modTime: d.modTime}
	for _, name := range slices.Sorted(maps.Keys(d.syncedKids)) { // sorted: the draws are deterministic
		k := d.syncedKids[name]
		if k.dir {
			nd.kids[name] = c.cloneDurable(k, o)
			continue
		}
		k.mu.RLock()
		img := k.synced.freeze()
		if o.Rand != nil && o.UnsyncedPages > 0 {
			img = tornImage(k.synced, k.data, o)
		}
		nk := &coreNode{data: img, modTime: k.modTime}
		nk.synced = nk.data.freeze()
		nd.kids[name] = nk
		k.mu.RUnlock()
	}
	nd.syncedKids = maps.Clone(nd.kids)
	return nd
}

// tornImage starts from synced and takes each page that differs in cur
// (pages are shared until written, so a differing pointer is a written
// page) with probability o.UnsyncedPages, and cur's size likewise.
func tornImage(synced, cur coreImage, o CrashOptions) coreImage {
	n := max(len(synced.pages), len(cur.pages))
	pages := make([]*corePage, n)
	copy(pages, synced.pages)
	for i := range n {
		var sp, cp *corePage
		if i < len(synced.pages) {
			sp = synced.pages[i]
		}
		if i < len(cur.pages) {
			cp = cur.pages[i]
		}
		if sp != cp && o.Rand.Float64() < o.UnsyncedPages {
			if cp != nil {
				q := new(corePage)
				q.b = cp.b
				cp = q
			}
			pages[i] = cp
		}
	}
	size := synced.size
	if cur.size != synced.size && o.Rand.Float64() < o.UnsyncedPages {
		size = cur.size
	}
	img := coreImage{pages: pages, size: int64(n) * corePageSize}
	img.truncate(size) // zero what lies past the size, as the invariant wants
	img.size = size
	img.freeze()
	return img
}

// CoreUsage is a summary of a [Core]'s contents.
type CoreUsage struct {
	Dirs        int   // directories reachable from the root, the root excluded
	Files       int   // files reachable from the root
	Bytes       int64 // current bytes of those files
	SyncedBytes int64 // synced bytes of those files
}

// Usage counts what is reachable from the root by current entries.
func (c *Core) Usage() CoreUsage {
	c.mu.Lock()
	defer c.mu.Unlock()
	var u CoreUsage
	var walk func(d *coreNode)
	walk = func(d *coreNode) {
		for _, k := range d.kids {
			if k.dir {
				u.Dirs++
				walk(k)
				continue
			}
			k.mu.RLock()
			u.Files++
			u.Bytes += k.data.size
			u.SyncedBytes += k.synced.size
			k.mu.RUnlock()
		}
	}
	walk(c.root)
	return u
}

type coreInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
}

func (i coreInfo) Name() string       { return i.name }
func (i coreInfo) Size() int64        { return i.size }
func (i coreInfo) Mode() fs.FileMode  { return i.mode }
func (i coreInfo) ModTime() time.Time { return i.mod }
func (i coreInfo) IsDir() bool        { return i.mode.IsDir() }
func (i coreInfo) Sys() any           { return nil }

// coreFile is an open handle on a core file node.
type coreFile struct {
	c      *Core
	n      *coreNode
	name   string
	flag   Flag
	closed atomic.Bool
}

func (f *coreFile) Name() string { return f.name }

func (f *coreFile) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("read", f.name, ErrNegativeOffset)
	}
	if f.closed.Load() {
		return 0, pathErr("read", f.name, ErrClosed)
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	n := f.n.data.readAt(p, off)
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *coreFile) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, pathErr("write", f.name, ErrNegativeOffset)
	}
	if f.closed.Load() {
		return 0, pathErr("write", f.name, ErrClosed)
	}
	if !f.flag.Writable() {
		return 0, pathErr("write", f.name, ErrReadOnly)
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.data.writeAt(p, off)
	f.n.modTime = f.c.cfg.now()
	return len(p), nil
}

func (f *coreFile) Size() (int64, error) {
	if f.closed.Load() {
		return 0, pathErr("stat", f.name, ErrClosed)
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	return f.n.data.size, nil
}

func (f *coreFile) Truncate(size int64) error {
	if size < 0 {
		return pathErr("truncate", f.name, ErrNegativeOffset)
	}
	if f.closed.Load() {
		return pathErr("truncate", f.name, ErrClosed)
	}
	if !f.flag.Writable() {
		return pathErr("truncate", f.name, ErrReadOnly)
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.data.truncate(size)
	f.n.modTime = f.c.cfg.now()
	return nil
}

// DropCache does nothing: memory is the file, there is no cache to drop
// it from. Like StartWriteback it is not a sync: a crash clone loses the
// range's unsynced bytes.
func (f *coreFile) DropCache(off, n int64) error {
	if err := checkDropRange(f.name, off, n); err != nil {
		return err
	}
	if f.closed.Load() {
		return pathErr("dropcache", f.name, ErrClosed)
	}
	return nil
}

// StartWriteback does nothing: memory has no device to start writing
// to. In particular it is not a sync: bytes only "written back" are lost
// in a crash clone like any other unsynced bytes.
func (f *coreFile) StartWriteback(off, n int64) error {
	if err := checkWritebackRange(f.name, off, n); err != nil {
		return err
	}
	if f.closed.Load() {
		return pathErr("writeback", f.name, ErrClosed)
	}
	return nil
}

// Sync snapshots the current bytes as the synced bytes, and writes the
// image to the backing store when there is one.
func (f *coreFile) Sync() error {
	if f.closed.Load() {
		return pathErr("sync", f.name, ErrClosed)
	}
	f.n.mu.Lock()
	f.n.data.syncTo(&f.n.synced)
	f.n.mu.Unlock()
	return f.writeBacking()
}

func (f *coreFile) writeBacking() error {
	b := f.c.cfg.backing
	if b == nil || !f.flag.Writable() {
		return nil
	}
	f.n.mu.RLock()
	img := f.n.data.bytes()
	f.n.mu.RUnlock()
	name := path.Join(f.c.cfg.backingDir, f.name)
	out, err := b.Open(name, ReadWrite|OCreate|OTrunc)
	if err != nil {
		return pathErr("write backing", f.name, err)
	}
	if _, err := out.WriteAt(img, 0); err != nil {
		return pathErr("write backing", f.name, errors.Join(err, out.Close()))
	}
	if err := out.Sync(); err != nil {
		return pathErr("write backing", f.name, errors.Join(err, out.Close()))
	}
	return pathErr("write backing", f.name, out.Close())
}

// Close closes the handle; with a backing store a writable handle writes
// the image there. Closing does not make anything durable in memory.
func (f *coreFile) Close() error {
	if f.closed.Swap(true) {
		return pathErr("close", f.name, ErrClosed)
	}
	return f.writeBacking()
}
