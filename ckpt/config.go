package ckpt

import (
	"fmt"
	"time"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
)

// Config is the runtime configuration, with the meanings of FTI's
// config.fti keys. [LoadConfig] reads one from a file; a Config literal
// works as well (zero fields take the defaults of [DefaultConfig]).
type Config struct {
	// NodeSize is the number of ranks per node; the rank count must be a multiple ([basic] node_size).
	NodeSize int
	// GroupSize is the number of nodes per group for L2/L3; the node count
	// must be a multiple ([basic] group_size).
	GroupSize int
	// CkptDir is the node-local directory ([basic] ckpt_dir).
	CkptDir string
	// GlblDir is the global directory on the parallel file system ([basic] glbl_dir).
	GlblDir string
	// MetaDir is the metadata directory that must survive node loss
	// ([basic] meta_dir). The restart state lives here, and the id of
	// the run that owns it (see the package documentation).
	MetaDir string
	// Run names the run to restart: FTI's exec_id ([restart] exec_id,
	// read when [restart] failure is 1 or 2, as FTI reads it). Empty:
	// the run meta_dir names, or a new one. A run given must be the one
	// meta_dir names, or meta_dir must name none: the job then takes the
	// run over from its directories in glbl_dir and ckpt_dir.
	Run string
	// Interval[L] is the Snapshot interval of level L (1..4); 0 disables
	// it ([basic] ckpt_l1..ckpt_l4: minutes as in FTI, or a Go duration such
	// as "30s" as an ftigo extension). Index 0 is unused.
	Interval [5]time.Duration
	// L3Parity is the Reed-Solomon parity count m of L3 groups ([basic]
	// l3_parity, an ftigo extension). 0 means group_size, FTI's scheme (a
	// group of k nodes survives the loss of any k of its 2k files);
	// 1..group_size-1 rotates the parity over stripes as SCR does (parity
	// overhead m/(k-m); any m nodes of a group may be lost).
	L3Parity int
	// KeepLastCkpt flushes the last checkpoint to L4 at Finalize (unless
	// it is an L4 one) and keeps it, so the next run restarts from it even
	// without node-local storage ([basic] keep_last_ckpt).
	KeepLastCkpt bool
	// KeepL4Ckpt keeps every L4 checkpoint instead of superseding it ([basic] keep_l4_ckpt).
	KeepL4Ckpt bool
	// KeepLast, when > 1, keeps the newest KeepLast checkpoints in addition
	// to FTI's rule ([basic] keep_last_n, an ftigo extension).
	KeepLast int
	// Compression is the lossless compression of every protected
	// variable's dCP blocks unless [Runtime.SetCompression] or
	// [ProtectWith] says otherwise for one ([basic] compression = zstd,
	// an ftigo extension; none by default).
	Compression fileformat.Codec
	// Verbosity is 1 debug, 2 info, 3 warnings, 4 errors only ([basic] verbosity).
	Verbosity int
	// Head makes node-local rank 0 of the communicator passed to Init a
	// dedicated post-processing rank ([basic] head = 1, FTI's heads; needs
	// NodeSize >= 2): the application gets NodeSize-1 ranks per node
	// ([Runtime.Comm]), Init on a head returns [ErrHead] once the
	// application has finalized, and the levels with Async set are
	// post-processed by the heads (see the package documentation).
	Head bool
	// KeepHeadsAlive is [basic] keep_heads_alive: accepted for FTI's
	// sake; a head's Init returns [ErrHead] whatever its value.
	KeepHeadsAlive bool
	// Async[L], for L = 2, 3, 4, moves level L's post-processing off the
	// solver's path ([basic] inline_lL = 0): Checkpoint commits the
	// checkpoint at L1 and returns, and a background goroutine of the rank
	// makes the partner copy, the parity or the L4 container and commits
	// it at L (see the package documentation). FTI needs head = 1 for
	// this; ftigo does not. Indexes 0 and 1 are unused.
	Async [5]bool
	// Snapshot makes Checkpoint block only for a copy of every protected
	// variable into the rank's staging memory ([basic] ckpt_snapshot = 1,
	// an ftigo extension): the checkpoint is then written, protected and
	// committed from that copy in the background (snapcopy.go).
	Snapshot bool
	// SnapshotBudget is the staging memory of a rank in bytes ([basic]
	// snapshot_budget, an ftigo extension); 0 takes a quarter of the
	// node's memory shared by its node_size ranks.
	SnapshotBudget int64
	// EnableStaging enables the staging calls ([basic] enable_staging):
	// [Runtime.SendFile] copies node-local files to global storage in the
	// background.
	EnableStaging bool
	// MaxVarID is the largest protectable id ([basic] max_var_id).
	MaxVarID int
	// BlockSize is the message size for L2/L3 transfers, in bytes
	// ([advanced] block_size, in KiB in the file, 1..2048).
	BlockSize int
	// TransferSize is the copy piece for local<->global transfers, in bytes
	// ([advanced] transfer_size, in MiB in the file, 8..64).
	TransferSize int
	// LocalTest simulates nodes on one machine: rank r is on node
	// r/NodeSize whatever the host ([advanced] local_test).
	LocalTest bool
	// FastForward divides every interval, for tests ([advanced] fast_forward, 1..10).
	FastForward int
	// MaxSyncIntv is the largest number of Snapshot calls between two
	// agreements on the clock; rounded down to a power of two ([basic] max_sync_intv).
	MaxSyncIntv int
	// EnableDCP enables differential checkpoints ([basic] enable_dcp):
	// checkpoints at levels 5-8 (and Snapshot's DCPInterval) store only
	// the dCP blocks that changed (docs/format/dcp.md). Without it those
	// requests are taken whole, with a warning, as in FTI.
	EnableDCP bool
	// DCPMode is FTI's block hash choice ([basic] dcp_mode: 1 MD5, 2
	// CRC32, as FTI 1.6 reads it; 0 when not set). It is accepted and
	// logged: ftigo hashes dCP blocks with BLAKE3-256 whatever it says.
	// The loader turns dCP off for another value, as FTI does.
	DCPMode int
	// DCPBlockSize is the dCP block size in bytes ([basic] dcp_block_size,
	// 512..65535, default 16384). With EnableDCP every checkpoint file is
	// hashed in blocks of this size, so that the next one can be
	// differential. It is read and checked only with EnableDCP.
	DCPBlockSize int
	// DCPStackSize is the most layers a chain of differential checkpoints
	// has, its full base included ([basic] dcp_stack_size, 1..10, default
	// 5). A chain that reaches it is compacted into a full checkpoint in
	// the background when the rank has a background worker (some
	// inline_lN = 0); otherwise the checkpoint that would exceed it is
	// written full. It is read and checked only with EnableDCP.
	DCPStackSize int
	// DCPInterval[L] is Snapshot's interval of differential checkpoints at
	// level L ([basic] dcp_l4 as in FTI; dcp_l1..dcp_l3 are ftigo
	// extensions), in the units of Interval; 0 disables it.
	DCPInterval [5]time.Duration
	// CkptIO is FTI's I/O mode ([basic] ckpt_io). 5 (HDF5) writes L4
	// checkpoints as one HDF5 file (package h5ckpt) instead of a SIONlib
	// container; every other value keeps FTI-FF files and the container
	// (1 POSIX, 3 FTI-FF and 4 SIONlib need nothing else; 2 and 6 are
	// warned about).
	CkptIO int
	// H5SingleFileEnable enables level 9 (FTI_L4_H5_SINGLE): a checkpoint
	// written as one HDF5 file holding every global dataset, from which a
	// restart on any number of ranks recovers ([basic]
	// h5_single_file_enable).
	H5SingleFileEnable bool
	// H5SingleFileDir is where level-9 files go; empty means GlblDir
	// ([basic] h5_single_file_dir).
	H5SingleFileDir string
	// H5SingleFilePrefix starts the level-9 file names,
	// "<prefix>-ID<id, 8 digits>.h5"; empty means "VPR-h5", FTI's
	// ([basic] h5_single_file_prefix).
	H5SingleFilePrefix string
	// H5SingleFileKeep keeps every level-9 file; without it a new one
	// replaces the previous one ([basic] h5_single_file_keep).
	H5SingleFileKeep bool
	// H5SingleFileNotInline asks for the level-9 file to be written by
	// head ranks ([basic] h5_single_file_inline = 0); ftigo writes it
	// inline in the application ranks, with a warning.
	H5SingleFileNotInline bool
	// Policy is when to checkpoint (ckpt_interval = auto) and when to
	// stop (signals, halt file, time left): see [PolicyConfig].
	Policy PolicyConfig
	// Warnings lists what the loader ignored (unknown keys, unsupported
	// options); Init logs them.
	Warnings []string
}

// DefaultConfig returns the defaults FTI documents: one rank per node, one
// node per group, block_size 1024 KiB, transfer_size 16 MiB, verbosity 2,
// max_var_id 102400, fast_forward 1, max_sync_intv 512. The directories
// have no default.
func DefaultConfig() Config {
	return Config{
		NodeSize: 1, GroupSize: 1, Verbosity: 2, MaxVarID: 102400,
		BlockSize: 1024 << 10, TransferSize: 16 << 20, FastForward: 1, MaxSyncIntv: 512,
		DCPBlockSize: defaultDCPBlockSize, DCPStackSize: defaultDCPStackSize,
	}
}

// FTI's dCP defaults.
const (
	defaultDCPBlockSize = 16384
	defaultDCPStackSize = 5
	minDCPBlockSize     = 512
	maxDCPBlockSize     = 65535
	maxDCPStackSize     = 10
	// FTI 1.6 adds 2000 to dcp_mode: 2001 is MD5, 2002 CRC32.
	dcpModeMD5   = 1
	dcpModeCRC32 = 2
)

// withDefaults fills zero fields from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.NodeSize == 0 {
		c.NodeSize = d.NodeSize
	}
	if c.GroupSize == 0 {
		c.GroupSize = d.GroupSize
	}
	if c.Verbosity == 0 {
		c.Verbosity = d.Verbosity
	}
	if c.MaxVarID == 0 {
		c.MaxVarID = d.MaxVarID
	}
	if c.BlockSize == 0 {
		c.BlockSize = d.BlockSize
	}
	if c.TransferSize == 0 {
		c.TransferSize = d.TransferSize
	}
	if c.FastForward == 0 {
		c.FastForward = d.FastForward
	}
	if c.MaxSyncIntv == 0 {
		c.MaxSyncIntv = d.MaxSyncIntv
	}
	if c.DCPBlockSize == 0 {
		c.DCPBlockSize = d.DCPBlockSize
	}
	if c.DCPStackSize == 0 {
		c.DCPStackSize = d.DCPStackSize
	}
	return c
}

func cfgErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrConfig}, a...)...)
}

// Validate checks the configuration for a run of ranks ranks and says what
// to change when it is wrong.
func (c Config) Validate(ranks int) error {
	c = c.withDefaults()
	if err := c.checkKeys(); err != nil {
		return err
	}
	return c.checkShape(ranks)
}

// checkKeys checks each key's value on its own.
func (c Config) checkKeys() error {
	switch {
	case c.CkptDir == "":
		return cfgErr("ckpt_dir is empty: set it to a node-local directory")
	case c.GlblDir == "":
		return cfgErr("glbl_dir is empty: set it to a directory on global storage")
	case c.MetaDir == "":
		return cfgErr("meta_dir is empty: set it to a directory that survives node loss")
	case c.Run != "" && levels.ValidRunID(c.Run) != nil:
		return cfgErr("run (exec_id): %v", levels.ValidRunID(c.Run))
	case c.NodeSize < 1:
		return cfgErr("node_size %d: set it to the number of ranks per node (>= 1)", c.NodeSize)
	case c.Head && c.NodeSize < 2:
		return cfgErr("head = 1 with node_size %d: a head takes node-local rank 0 of each node, so node_size must be at least 2 (one head and one application rank)", c.NodeSize)
	case c.GroupSize < 1:
		return cfgErr("group_size %d: set it to the number of nodes per group (>= 1)", c.GroupSize)
	case c.Verbosity < 1 || c.Verbosity > 4:
		return cfgErr("verbosity %d: use 1 (debug), 2 (info), 3 (warnings) or 4 (errors)", c.Verbosity)
	case c.BlockSize < 1<<10 || c.BlockSize > 2048<<10:
		return cfgErr("block_size %d KiB: use 1..2048", c.BlockSize>>10)
	case c.TransferSize < 8<<20 || c.TransferSize > 64<<20:
		return cfgErr("transfer_size %d MiB: use 8..64", c.TransferSize>>20)
	case c.FastForward < 1 || c.FastForward > 10:
		return cfgErr("fast_forward %d: use 1..10", c.FastForward)
	case c.MaxVarID < 0:
		return cfgErr("max_var_id %d: must not be negative", c.MaxVarID)
	case c.SnapshotBudget < 0:
		return cfgErr("snapshot_budget %d: must not be negative (0 takes the default)", c.SnapshotBudget)
	case c.KeepLast < 0:
		return cfgErr("keep_last_n %d: must not be negative", c.KeepLast)
	case c.L3Parity < 0:
		return cfgErr("l3_parity %d: use 0 (= group_size) or 1..group_size", c.L3Parity)
	case c.L3Parity > c.GroupSize:
		return cfgErr("l3_parity %d is larger than group_size %d: use 0 (= group_size) or 1..%d",
			c.L3Parity, c.GroupSize, c.GroupSize)
	case c.KeepHeadsAlive && !c.Head:
		return cfgErr("keep_heads_alive = 1 with head = 0: there is no head to keep alive (FTI refuses it too); set head = 1 or keep_heads_alive = 0")
	}
	for l := 1; l <= 4; l++ {
		if c.Interval[l] < 0 {
			return cfgErr("ckpt_l%d is negative: use 0 to disable", l)
		}
		if c.DCPInterval[l] < 0 {
			return cfgErr("dcp_l%d is negative: use 0 to disable", l)
		}
	}
	if err := c.Policy.check(); err != nil {
		return err
	}
	return c.checkDCP()
}

// checkDCP checks the dCP settings, which count only with EnableDCP.
func (c Config) checkDCP() error {
	switch {
	case !c.EnableDCP:
	case c.DCPBlockSize < minDCPBlockSize || c.DCPBlockSize > maxDCPBlockSize:
		return cfgErr("dcp_block_size %d: use %d..%d bytes", c.DCPBlockSize, minDCPBlockSize, maxDCPBlockSize)
	case c.DCPStackSize < 1 || c.DCPStackSize > maxDCPStackSize:
		return cfgErr("dcp_stack_size %d: use 1..%d", c.DCPStackSize, maxDCPStackSize)
	case c.DCPMode < 0 || c.DCPMode > dcpModeCRC32:
		return cfgErr("dcp_mode %d: use 1 (MD5) or 2 (CRC32), or 0 for unset; ftigo hashes with BLAKE3 either way", c.DCPMode)
	}
	return nil
}

// checkShape checks the keys against a run of ranks ranks.
func (c Config) checkShape(ranks int) error {
	if ranks < 1 {
		return cfgErr("%d ranks", ranks)
	}
	if ranks%c.NodeSize != 0 {
		return cfgErr("%d ranks is not a multiple of node_size %d: change node_size to a divisor of %d or run a multiple of %d ranks",
			ranks, c.NodeSize, ranks, c.NodeSize)
	}
	nodes := ranks / c.NodeSize
	if nodes%c.GroupSize != 0 {
		return cfgErr("%d nodes is not a multiple of group_size %d: change group_size to a divisor of %d",
			nodes, c.GroupSize, nodes)
	}
	if c.GroupSize < 2 && (c.Interval[2] > 0 || c.Interval[3] > 0 || (c.EnableDCP && (c.DCPInterval[2] > 0 || c.DCPInterval[3] > 0))) {
		return cfgErr("ckpt_l2/ckpt_l3 need group_size >= 2 (it is %d): raise group_size or set ckpt_l2 = ckpt_l3 = 0", c.GroupSize)
	}
	if c.GroupSize >= 32 && (c.Interval[3] > 0 || (c.EnableDCP && c.DCPInterval[3] > 0)) {
		return cfgErr("ckpt_l3 needs group_size < 32 (it is %d): lower group_size", c.GroupSize)
	}
	return nil
}

// Limits on the files ftigo reads whole. A larger file is refused before
// anything is allocated (vfd.ReadFileLimit), so a wrong path (a disk
// image, a sparse file) gives an error, not an out-of-memory crash.
const (
	// MaxConfigSize is the largest config.fti LoadConfig reads: 1 MiB,
	// hundreds of times FTI's full set of keys.
	MaxConfigSize = 1 << 20
	// maxTopologySize bounds the node table in meta_dir: a line of index
	// and host name per node, for up to a million nodes.
	maxTopologySize = 64 << 20
)
