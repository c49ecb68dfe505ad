// Package ckpt is ftigo's public checkpoint/restart API, with FTI's model:
// a simulation registers its state with [Protect], calls
// [Runtime.Checkpoint] or [Runtime.Snapshot] in its solver loop, and on the
// next launch learns from [Runtime.Status] that it is a restart and gets
// its data back, bit for bit, with [Runtime.Recover].
//
// It owns the API, the configuration ([Config], [LoadConfig] for FTI's
// config.fti), the node table in meta_dir, the mapping of protected
// variables onto FTI-FF files (package fileformat) and Snapshot's
// schedule. How a checkpoint is stored, committed, kept and recovered
// belongs to package levels; the topology to package partner.
//
// # Lifecycle, in call order
//
//  1. [Init] (collective): validates the configuration for the world size,
//     builds the topology (a replacement node takes a vanished node's
//     place), creates ckpt_dir/node%04d, glbl_dir and meta_dir, removes
//     what a crashed run left half-written, and on a restart finds the
//     newest checkpoint every rank can read (rebuilding from redundancy);
//     an unrecoverable restart is an error, never a fresh start. An L1
//     checkpoint whose files are in place is checked without reading its
//     data (size, header, metadata and the file checksum over every block
//     hash); Recover then hashes every block as it reads it and, on a
//     mismatch, falls back as Init would have.
//  2. [Protect] / [ProtectValue] (local) for every variable, on a restart
//     as on a fresh run; protecting an id again replaces it. [ProtectRaw]
//     registers memory Go does not manage (C memory behind the C API).
//  3. On a restart ([Runtime.Status] is Restart or RestartKept):
//     [Runtime.Recover] (collective), or [Runtime.RecoverVar],
//     [Runtime.StoredSize], [Runtime.Realloc] (local).
//  4. In the loop: [Runtime.Snapshot] every iteration, or
//     [Runtime.Checkpoint] explicitly (both collective). A checkpoint is
//     committed only when every rank wrote it; otherwise every rank gets
//     the same error and the previous checkpoint stays. Rank 0 logs one
//     info line per committed checkpoint, in FTI's manner: "Ckpt. ID 7 (L2)
//     (64.00 MiB/proc) taken in 0.412 sec., 621.4 MiB/s (Wt 0.301, Ps 0.090,
//     Cm 0.021)" — size per rank, wall time, aggregate bandwidth, and the
//     time spent writing the data, post-processing at the level (partner
//     copy, parity, container) and committing; the same values are fields.
//  5. [Runtime.Finalize] (collective): applies keep_last_ckpt (the newest
//     checkpoint is flushed to L4 unless it is at L4 already, and that L4
//     checkpoint is kept for the next run, status RestartKept) and deletes
//     the rest.
//
// A job that ends without Finalize (every committed checkpoint stays for
// the next run) calls [Runtime.Wait] so no background deletion of
// superseded checkpoints is cut short.
//
// [RebuildOffline] runs step 1 (verification and rebuild) for a job that
// is not running (ftigo rebuild), in an in-process world shaped like the
// newest checkpoint.
//
// # Configuration beyond FTI
//
// [Config] reads FTI's config.fti keys with their meanings, plus a few
// ftigo extensions: keep_last_n (keep the newest n checkpoints) and
// l3_parity in [basic], the Reed-Solomon parity count m of L3 groups.
// l3_parity = 0 (or absent, or group_size) is FTI's scheme: each member of
// a group of k nodes holds a parity file as large as the group's largest
// data file, and the group survives the loss of any k of its 2k files (up
// to half its nodes). 1 <= m < group_size rotates the parity over stripes
// as SCR does: each parity file is about m/(k-m) of a data file and the
// group survives the loss of any m of its nodes with all their files
// (e.g. group_size = 8, l3_parity = 2: overhead 1/3, any 2 nodes).
//
// # Concurrency
//
// A [Runtime] belongs to one rank and is used from that rank's goroutine
// only; ranks of an in-process world each have their own. Collective calls
// must be made by every rank in the same order with the same arguments.
// Protected memory must not change while Checkpoint or Snapshot runs: it
// is written in place, without a copy. Restart state lives in meta_dir;
// the configuration file is only read.
package ckpt
