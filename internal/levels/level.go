package levels

import (
	"fmt"
	"io"
	"path"
	"time"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/comm"
	"github.com/ftigo/ftigo/internal/partner"
	"github.com/ftigo/ftigo/vfd"
)

// ID is a checkpoint level: 1 local, 2 partner copy, 3 Reed-Solomon group
// parity, 4 global (parallel file system).
//
// wire format: never change — level numbers are stored in manifests.
type ID int

// The four levels.
const (
	L1 ID = 1 // node-local file only
	L2 ID = 2 // plus a copy on the ring partner's node
	L3 ID = 3 // plus Reed-Solomon parity across the group
	L4 ID = 4 // on the global file system
)

// Valid reports whether id is one of L1..L4.
func (id ID) Valid() bool { return id >= L1 && id <= L4 }

// String returns "L1".."L4".
func (id ID) String() string { return fmt.Sprintf("L%d", int(id)) }

// Where names one of the three storage areas of an [Env].
//
// wire format: never change — stored in manifests.
type Where uint8

// Storage areas.
const (
	Local  Where = 1 // node-local storage of the holding rank's node (ckpt_dir)
	Global Where = 2 // global storage shared by all nodes (glbl_dir)
	Meta   Where = 3 // metadata storage that survives node loss (meta_dir)
)

// String returns "local", "global" or "meta".
func (w Where) String() string {
	switch w {
	case Local:
		return "local"
	case Global:
		return "global"
	case Meta:
		return "meta"
	}
	return fmt.Sprintf("where(%d)", int(w))
}

// Store is a directory seen through a driver.
type Store struct {
	Driver vfd.Driver
	Dir    string
}

// Path joins name under the store's directory.
func (s Store) Path(name string) string { return path.Join(s.Dir, name) }

// Env is everything a level needs to run on one rank. The runtime builds
// one per rank; levels must not keep references to it past a call.
type Env struct {
	// Comm is the world communicator of the application ranks. Collective
	// level calls use it; offline tools run the same code inside an
	// in-process world (see the package documentation).
	Comm comm.Comm
	// Topo is the node/sector/group/ring layout of the ranks of Comm
	// (after any remap onto replacement nodes).
	Topo *partner.Topology
	// Rank is this rank in Comm.
	Rank int
	// Local is this rank's node-local directory (shared by the ranks of one node).
	Local Store
	// Global is the directory on global storage, shared by every rank.
	Global Store
	// Meta is the metadata directory, shared by every rank; manifests live here.
	Meta Store
	// Run is the run that owns Local, Global and Meta ([RunFile]):
	// every manifest the engine commits records it, and a manifest
	// copy that records another run is not this run's. Empty for a
	// run from before run ids.
	Run string
	// BlockSize is the message size in bytes for transfers between ranks
	// (FTI's block_size, in bytes here).
	BlockSize int
	// TransferSize is the piece size in bytes for local<->global copies
	// (FTI's transfer_size, in bytes here).
	TransferSize int
	// Logger receives debug and warning lines; never nil inside a level call.
	Logger *zap.Logger
	// Now is the clock; never nil inside a level call.
	Now func() time.Time
	// ImageLimit, when positive, lets [Level.Recover] read this rank's
	// data once: a level that verifies the rank's data file (or L4 task)
	// of at most ImageLimit bytes reads it into memory as it checks it and
	// returns the verified bytes in [Source.Image], so the runtime restores
	// the variables from memory instead of reading the file a second
	// time. Zero or negative: the data stays on storage only.
	ImageLimit int64

	// tentative is set by [Engine.Recover] while it recovers a manifest
	// whose two copies disagree: a file that does not match this copy
	// may be the other copy's (this run's), so a level must not remove
	// or replace it.
	tentative bool

	// h5view, set by [Engine.RecoverOne] around [Global4H5.Recover], is
	// this rank's view of the HDF5 L4 file, made by rank 0 which parsed
	// and hashed the file's tables once ([h5Views]); h5err is why there is
	// none. Without either, Recover parses the whole file itself.
	h5view []byte
	h5err  error

	// pre is the verification of this rank's L1 data file that
	// [Engine.Open] started ahead ([Engine.prefetch]); [Local1.Recover]
	// takes its image when it checked the very file Recover asks for.
	pre *preload
}

// Store returns the store of area w for this rank.
func (e *Env) Store(w Where) Store {
	switch w {
	case Local:
		return e.Local
	case Global:
		return e.Global
	default:
		return e.Meta
	}
}

// Digest is the BLAKE3-256 of all the bytes of a file ([FileDigest]), or
// for an L1 FTI-FF data file its file checksum ([DigestFTIFF]). Every file
// a manifest lists carries one.
type Digest [32]byte

// File is one file of a checkpoint as the manifest records it.
type File struct {
	// Role says what the file is: "data" (the rank's FTI-FF file),
	// "partner" (L2 copy of another rank's data file), "parity" (L3),
	// "container" (L4 shared container) or a level's own word.
	Role string `json:"role"`
	// Where is the storage area holding the file.
	Where Where `json:"where"`
	// Name is the path relative to the area's directory (for Local, the
	// holding rank's node directory), with no ".tmp" suffix.
	Name string `json:"name"`
	// Size is the file's size in bytes.
	Size int64 `json:"size"`
	// Digest is the BLAKE3-256 of the file's bytes unless [AttrDigest]
	// names another kind ([DigestFTIFF], [DigestSION]).
	Digest Digest `json:"digest"`
	// Of is the rank whose data this file protects (equal to the holder for "data").
	Of int `json:"of"`
	// Attrs holds level-specific values (L3 padded size, L4 offsets).
	Attrs map[string]string `json:"attrs,omitempty"`
}

// TmpSuffix is appended to every file name while a checkpoint is being
// written; the commit renames the file to its name without it.
//
// wire format: never change — Init removes leftovers by this suffix.
const TmpSuffix = ".tmp"

// Pending is a checkpoint between the data write and the commit, as one
// rank sees it.
type Pending struct {
	// Seq is the commit sequence number; it names the checkpoint's directories.
	Seq uint64
	// ID is the application's checkpoint id.
	ID int64
	// Level is the level being taken.
	Level ID
	// Dir is the checkpoint's directory name inside each area ("ckpt00000007").
	Dir string
	// Files are the files this rank holds for the checkpoint, written
	// under Name+TmpSuffix (but see Published, and [Pending.FileSuffix]
	// for a level's files) and synced. The runtime puts the data file
	// first; levels append the files they add.
	Files []File
	// DigestPending is set when the runtime left the data file's digest
	// to a [DataReader] level: its Protect computes it from the bytes it
	// reads and records it with [Pending.SetDataDigest].
	DigestPending bool
	// Published counts the leading entries of Files that are already
	// published under their final names. That is the data file when the
	// intent marker was durable ahead. At [Engine.Raise] it is every file
	// of the committed checkpoint. Levels read them without TmpSuffix, and
	// the commit does not rename them.
	Published int
	// ahead is set when the checkpoint's intent marker was durable before
	// its data was written ([Pending.Final]).
	ahead bool
	// final holds the files a level writes under their final names: those
	// of a [Prenamer], created empty by the engine before the syncs of
	// their directory (Protect writes them in place, [Pending.FileSuffix]),
	// and those a level recorded with [Pending.WroteFinal]. The commit
	// does not rename them, and a failed checkpoint removes them.
	final map[fileKey]bool
	// tap, set by [Engine.Raise], checks the published data file in the
	// level's read pass. A [DataTapper] shows it every byte it reads.
	tap io.Writer
	// raising is set by [Engine.Raise], which checks the committed data
	// file itself (its tap, a check beside, or L2's receivers). A level
	// adds no check of its own then.
	raising bool
	// preamble, when not nil, is the FTI-FF preamble of the data file
	// ([fileformat.Reader.Preamble]), read when its checksum was recorded
	// ([DigestFTIFF]): a partner copy sends it ahead of the file.
	preamble []byte

	// chain is the chain of a differential checkpoint (nil for a full one),
	// opts the checkpoint's options, stats this rank's data statistics and
	// total their sums (set while the manifest is written).
	chain []uint64
	opts  *checkpointOptions
	// dirSynced holds the areas whose checkpoint directory entry is
	// durable already (synced beside the data file's fsync).
	dirSynced map[Where]bool
	stats     DataStats
	total     DataStats
}

// Data returns this rank's data file entry.
func (p *Pending) Data() File { return p.Files[0] }

// DataPath returns the path this rank's data file has now: its tmp name
// while the checkpoint is written, its final name when it is published
// already ([Pending.Published]).
func (p *Pending) DataPath(env *Env) string {
	data := p.Data()
	if p.Published > 0 {
		return env.Store(data.Where).Path(data.Name)
	}
	return env.Store(data.Where).Path(data.Name) + TmpSuffix
}

// FileSuffix returns the suffix under which a level's Protect writes
// its file name (a path relative to the Local area, as [File.Name]): ""
// when the engine created the file under its final name already (see
// [Prenamer]), [TmpSuffix] otherwise.
func (p *Pending) FileSuffix(name string) string {
	if p.final[fileKey{Local, name}] {
		return ""
	}
	return TmpSuffix
}

// fileKey names a file of a checkpoint: its area and its name there.
type fileKey struct {
	w    Where
	name string
}

// Final reports whether the checkpoint's intent marker was durable before
// its data was written. A level may then create its files under their
// final names inside the checkpoint's directories ("ckpt%08d" of an
// area). Start-up removes the directories of a checkpoint that did not
// commit, whatever names they hold. A level that does so records each
// file with [Pending.WroteFinal]. It makes the name durable itself before
// Protect (or [DataOpener.ProtectData]) returns: it syncs the file's
// directory, and that directory's entry in the area. Final is false at
// [Engine.Raise], which writes into a committed checkpoint's directories.
func (p *Pending) Final() bool { return p.ahead }

// WroteFinal records that the level wrote the file name of area w under
// its final name (see [Pending.Final]): the commit does not rename it,
// and a failed checkpoint removes it.
func (p *Pending) WroteFinal(w Where, name string) {
	if p.final == nil {
		p.final = map[fileKey]bool{}
	}
	p.final[fileKey{w, name}] = true
}

// inPlace reports whether f, appended by a level's Protect, was written
// under its final name ([Pending.WroteFinal], [Prenamer]), or is a file
// of a container with no name of its own ([AttrInContainer]). The commit
// renames every other file after the data file's.
func (p *Pending) inPlace(f File) bool {
	return f.Attrs[AttrInContainer] != "" || p.final[fileKey{f.Where, f.Name}]
}

// SetDataDigest records the data file's digest computed by a level.
func (p *Pending) SetDataDigest(d Digest) {
	p.Files[0].Digest = d
	p.DigestPending = false
}

// Source is where a rank reads its recovered data file.
type Source struct {
	Store Store
	Name  string // path relative to Store.Dir
	Size  int64
	// Digest is the data file's verified digest.
	Digest Digest
	// Task, when not nil, is the manifest entry of data that lives only
	// as a task of an L4 container in Store (the global area).
	Task *File
	// Image, when not nil, holds every byte of the data (Size bytes),
	// read from storage once and verified against the manifest's digest
	// as it was read ([Env.ImageLimit]); [OpenSource] then serves it from
	// memory. The runtime drops it once the data is restored.
	Image []byte
	// Chain lists, oldest first, the sources of the checkpoints a
	// differential checkpoint depends on (the full base first); empty for
	// a full checkpoint. [OpenSource] opens the image they make together.
	Chain []Source
	// H5View, for data in an HDF5 L4 file, is this rank's view of it
	// (h5ckpt.File.RankView, made by the rank that checked the file's
	// tables): the runtime opens the file with h5ckpt.OpenView, reading
	// only this rank's variables. Empty: it opens the whole file.
	H5View []byte
}

// Level is one storage level. The runtime calls its methods on every rank
// with the same arguments except the Env; calls marked collective must be
// made by every rank, and a level must make the same sequence of
// collective calls on every rank even when its own part fails (report the
// failure through the return value: the runtime votes).
type Level interface {
	// ID returns the level number.
	ID() ID

	// DataArea returns the area where each rank writes its data file for a
	// checkpoint at this level: Local for L1-L3, Global for an inline L4.
	DataArea() Where

	// Protect adds redundancy after every rank has written and synced its
	// data file (p.Files[0], under its tmp name or, see
	// [Pending.Published], its final name). Collective. It writes its
	// files under their tmp names — or in place, for the names the
	// engine created for a [Prenamer] ([Pending.FileSuffix]) — syncs
	// them, and appends them to p.Files; the runtime then votes, renames
	// what is under tmp names, syncs the directories and writes the
	// manifest. L1 does nothing.
	Protect(env *Env, p *Pending) error

	// Recover checks, and rebuilds where it can, this rank's files of the
	// committed checkpoint m, verifying every digest, and returns where this
	// rank reads its data. Collective. A nil error on this rank does not mean
	// the checkpoint is usable: the runtime combines every rank's result and
	// moves to an older checkpoint if any rank failed. Recover must not
	// modify files of m that are good, and writes rebuilt files with the
	// commit protocol (tmp name, sync, rename, directory sync).
	Recover(env *Env, m *Manifest) (Source, error)
}

// Optional capabilities, io/fs style: a level implements the small
// interfaces below that it has. The engine asks through the probe
// function beside each one. A probe uses the capability when the level
// has it and falls back to a default otherwise. So adding a level needs
// no engine edit: its capabilities say how the engine treats it.

// DataReader is the optional capability of a level whose Protect reads
// the whole data file anyway (L2 sends it, L3 encodes it). The engine
// then does not wait for the data file's fsync before Protect. The fsync
// and its directory syncs run while Protect reads the file from the page
// cache, and are voted on with Protect. Nor does the engine read the
// file back for a digest the write did not give. It sets
// [Pending.DigestPending], and Protect records the digest of the bytes
// it reads. The digest means the same either way: the BLAKE3 of the
// file's bytes as read back after writing.
type DataReader interface {
	Level
	// ReadsData reports whether Protect computes the data digest.
	ReadsData() bool
}

// readsData reports whether l's Protect reads the whole data file
// ([DataReader]). False without the capability.
func readsData(l Level) bool {
	r, ok := l.(DataReader)
	return ok && r.ReadsData()
}

// DataOpener is the optional capability of a level that places each
// rank's data itself, not in a data file of its own. The inline L4
// writes it straight into its container. The engine then calls, on every
// rank: OpenData (collective: every rank gets a file or every rank an
// error), the [WriteFunc] on that file, Sync and Close. After the vote it
// calls ProtectData instead of [Level.Protect], or AbortData when the
// vote failed. ProtectData records on p.Files[0] where the data is. That
// entry, the data entry, has the level's DataArea and the conventional
// name. ProtectData marks it with [AttrInContainer] when no file has
// that name.
type DataOpener interface {
	// OpensData reports whether the level uses this path; the answer
	// must be the same on every rank.
	OpensData() bool
	// OpenData returns the file this rank's data is written to. hint is
	// the size of this rank's data in the newest committed checkpoint
	// (0 when there is none). Collective.
	OpenData(env *Env, p *Pending, hint int64) (vfd.File, error)
	// ProtectData commits what f was written into and appends the files
	// it made to p.Files, under their tmp names — or their final names,
	// recorded with [Pending.WroteFinal], when [Pending.Final] allowed
	// and their directories synced — synced. Collective; on error it has
	// discarded them.
	ProtectData(env *Env, p *Pending, f vfd.File) error
	// AbortData discards what f was written into. Collective.
	AbortData(env *Env, p *Pending, f vfd.File) error
}

// opensData returns l's [DataOpener] when l places the data itself. ok
// is false without the capability.
func opensData(l Level) (o DataOpener, ok bool) {
	o, ok = l.(DataOpener)
	if !ok || !o.OpensData() {
		return nil, false
	}
	return o, true
}

// Prenamer is the optional capability of a level whose Protect writes
// files beside the data file, in this rank's checkpoint directory of the
// Local area (L2's partner copy, L3's parity). It knows their names
// before any byte is read. The engine can then create each of them empty
// under its final name, before the directory syncs that run beside the
// data file's fsync. Protect writes them in place and syncs them. The
// commit has nothing left to rename or sync but the manifest: one round
// of device flushes fewer than with tmp names. The engine does this only
// when the checkpoint's intent marker is durable ahead. Start-up then
// removes whatever an uncommitted checkpoint left, whatever its names.
// Protect must list every name given, or the checkpoint fails. The names
// are removed if the checkpoint fails. At [Engine.Raise], which writes
// into a committed checkpoint's directory, nothing is created. Nor when
// the marker was not written ahead: Protect writes tmp names then.
type Prenamer interface {
	// Prenames returns the names, relative to env.Local, of the files
	// Protect will write on this rank for p (none when it cannot tell).
	Prenames(env *Env, p *Pending) []string
}

// prenames returns the names l's Protect will write on this rank for p
// ([Prenamer]). None without the capability.
func prenames(l Level, env *Env, p *Pending) []string {
	if pn, ok := l.(Prenamer); ok {
		return pn.Prenames(env, p)
	}
	return nil
}

// Remover is the optional capability of a level that deletes more than the
// files its manifest lists when a checkpoint is superseded. Without it the
// runtime removes each rank's listed files and the checkpoint directories.
type Remover interface {
	Remove(env *Env, m *Manifest) error
}

// removeElsewhere lets l remove its files of m outside the checkpoint
// directories ([Remover]). Nothing to do without the capability.
func removeElsewhere(l Level, env *Env, m *Manifest) error {
	if r, ok := l.(Remover); ok {
		return r.Remove(env, m)
	}
	return nil
}

// OfflineRebuilder is the optional capability of a level whose lost
// files one process can rebuild with no running job (the `ftigo rebuild`
// command). That process sees every node's local area. [Partner2] and
// [RS3] have it.
type OfflineRebuilder interface {
	RebuildOffline(m *Manifest, topo *partner.Topology, local func(node int) Store, o partner.Options) ([]string, error)
}

// offlineRebuilder returns l's [OfflineRebuilder]. Nil without the
// capability: l keeps no redundancy to rebuild from.
func offlineRebuilder(l Level) OfflineRebuilder {
	rb, _ := l.(OfflineRebuilder)
	return rb
}

// FTIFFRecorder is the optional capability of a level that records an
// FTI-FF data file's checksum as its digest ([DigestFTIFF]). Without it
// the digest is the BLAKE3 of the file's bytes. The checksum is enough
// for a level that reads no byte of the file (L1). It is enough too for
// a level that checks every byte it reads against the file's block
// hashes (L2's partner copy, L3's encoder).
type FTIFFRecorder interface {
	// RecordsFTIFF reports whether the level records the checksum.
	RecordsFTIFF() bool
}

// recordsFTIFF reports whether l records an FTI-FF data file's checksum
// as its digest ([FTIFFRecorder]). False without the capability.
func recordsFTIFF(l Level) bool {
	r, ok := l.(FTIFFRecorder)
	return ok && r.RecordsFTIFF()
}

// FTIFFChecker is the optional capability of a level whose Protect
// checks an FTI-FF data file against its recorded checksum as it reads
// it. L2 does: each partner copy is checked against the file's block
// hashes as it arrives. The engine reads the file's preamble for it
// (header, metadata and file block), which the level sends ahead. At
// [Engine.Raise] the engine adds no check of its own. It reports a
// [partner.ErrHashMismatch] from Protect as a data file that changed
// since its L1 commit.
type FTIFFChecker interface {
	// ChecksFTIFF reports whether Protect checks the FTI-FF checksum.
	ChecksFTIFF() bool
}

// checksFTIFF reports whether l's Protect checks an FTI-FF data file
// against its checksum ([FTIFFChecker]). False without the capability.
func checksFTIFF(l Level) bool {
	c, ok := l.(FTIFFChecker)
	return ok && c.ChecksFTIFF()
}

// DataTapper is the optional capability of a level whose Protect shows
// every byte of the data file it reads, in order, to the tap that
// [Engine.Raise] sets on the [Pending]. The raise then checks the data
// file in the level's own read pass, so the file is read once. L2 and L3
// show it through [partner.FileInfo.Tap], L4 through its copies. Without
// the capability a raise checks the data file beside the level's pass.
type DataTapper interface {
	// TapsData reports whether Protect shows the tap what it reads.
	TapsData() bool
}

// tapsData reports whether l's Protect shows the tap every byte it reads
// ([DataTapper]). False without the capability.
func tapsData(l Level) bool {
	t, ok := l.(DataTapper)
	return ok && t.TapsData()
}

// RaiseChecker is the optional capability of a level that a committed L1
// checkpoint cannot always be raised to ([Engine.Raise]). Without it
// every level above L1 can be raised to.
type RaiseChecker interface {
	// CanRaise returns nil when a committed L1 checkpoint can be raised
	// to the level, or why not.
	CanRaise() error
}

// canRaise returns why a committed L1 checkpoint cannot be raised to l
// ([RaiseChecker]). Nil without the capability.
func canRaise(l Level) error {
	if r, ok := l.(RaiseChecker); ok {
		return r.CanRaise()
	}
	return nil
}
