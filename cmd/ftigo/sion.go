package main

import (
	"errors"
	"fmt"
	"io"
	"path"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

func (a *app) sionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "sion",
		Short: "inspect, split, pack and defragment SIONlib containers",
		Long: `Works with SIONlib containers (fileformat 5, as ftigo's L4 level and SIONlib
1.7 write them). Multi-file sets are opened through file 0; the siblings
FILE.000001 ... must sit next to it. Containers are written under OUT.tmp
and renamed when complete. On a terminal, split, pack and defrag of large
inputs show a progress bar on standard error.

Exit codes: 0 success, 1 a problem was found (unreadable or corrupt
container, I/O error), 2 usage error.`,
		Example: `  ftigo sion dump run/global/ckpt00000004/l4.sion
  ftigo sion split l4.sion out/task_
  ftigo sion pack -o all.sion --fsblksize 4096 rank0.fti rank1.fti rank2.fti
  ftigo sion defrag par2.sion one.sion`,
	}
	a.group(c)
	c.AddCommand(a.sionDumpCmd(), a.sionSplitCmd(), a.sionPackCmd(), a.sionDefragCmd())
	return c
}

func (a *app) sionDumpCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "dump FILE",
		Short: "metadata and a per-task, per-block table (like siondump -a -l -m)",
		Long: `Prints a container's metadata (fileformat, library version, byte order,
fsblksize, files, tasks, key-value mode, prefix), a table of its tasks
(file, local and global rank, chunk size, start, blocks, bytes), a table of
every task's blocks (offset, bytes, fill), and the global rank mapping of a
multi-file set.

Exit codes: 0 success, 1 the container is unreadable or corrupt, 2 usage error.`,
		Example: `  ftigo sion dump l4.sion
  ftigo sion dump l4.sion --json`,
		Args: argNames(false, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := vfd.Sec2{}
			if err := inputFile(d, "FILE", args[0], false); err != nil {
				return err
			}
			res, err := sionDump(d, args[0])
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			return printSionDump(a.stdout, res)
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

func (a *app) sionSplitCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "split FILE PREFIX",
		Short: "one file per task, PREFIX00000, PREFIX00001, ... (like sionsplit)",
		Long: `Writes each task's data to its own file, PREFIX00000, PREFIX00001, ...
(like sionsplit); key-value containers give one file per task and key,
PREFIX00000_000000000007. PREFIX's directory is created when missing.

Exit codes: 0 success, 1 the container is unreadable or an output could not
be written, 2 usage error.`,
		Example: `  ftigo sion split l4.sion out/task_
  ftigo sion split l4.sion out/task_ --json`,
		Args: argNames(false, "FILE", "PREFIX"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := vfd.Sec2{}
			if err := inputFile(d, "FILE", args[0], false); err != nil {
				return err
			}
			if dir := path.Dir(args[1]); dir != "." {
				if err := outputDir(d, "PREFIX's directory", dir); err != nil {
					return err
				}
			}
			files, err := sionSplit(d, args[0], args[1], a.sionProgress(jsonOut, "sion split"))
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(a.stdout, files)
			}
			for _, f := range files {
				fmt.Fprintf(a.stdout, "%s %d\n", f.Path, f.Bytes)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

func (a *app) sionPackCmd() *cobra.Command {
	var jsonOut bool
	var out string
	var blk int
	c := &cobra.Command{
		Use:   "pack -o OUT FILE...",
		Short: "task-local files into one container, task i = i-th FILE",
		Long: `Packs task-local files into one single-file container: task i holds the
i-th FILE as one block. Empty files give empty tasks.

Exit codes: 0 success, 1 an input could not be read or the container
written, 2 usage error.`,
		Example: `  ftigo sion pack -o all.sion rank0.fti rank1.fti rank2.fti
  ftigo sion pack rank*.fti --output all.sion --fsblksize 4096 --json`,
		Args: argNames(true, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usagef("pack needs --output (-o) OUT")
			}
			if blk <= 0 || blk > 1<<30 {
				return usagef("bad --fsblksize %d: use 1..%d", blk, 1<<30)
			}
			d := vfd.Sec2{}
			for _, in := range args {
				if err := inputFile(d, "FILE", in, true); err != nil {
					return err
				}
			}
			if err := outputFile(d, "--output", out); err != nil {
				return err
			}
			res, err := sionPack(d, out, int32(blk), args, a.sionProgress(jsonOut, "sion pack"))
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			fmt.Fprintf(a.stdout, "%s: %d tasks\n", res.Container, len(res.Tasks))
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "output container (required)")
	c.Flags().IntVar(&blk, "fsblksize", sion.DefaultFSBlkSize, "alignment in bytes")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

func (a *app) sionDefragCmd() *cobra.Command {
	var jsonOut bool
	var blk int
	c := &cobra.Command{
		Use:   "defrag IN OUT",
		Short: "rewrite a container or set as a single file with one block per task (like siondefrag)",
		Long: `Rewrites IN (a single file, or a multi-file set through its file 0) as a
single-file container OUT with one block per task, keeping the global
ranks, key-value mode and byte order (like siondefrag).

Exit codes: 0 success, 1 IN is unreadable or corrupt or OUT could not be
written, 2 usage error.`,
		Example: `  ftigo sion defrag par2.sion one.sion
  ftigo sion defrag par2.sion one.sion --fsblksize 64 --json`,
		Args: argNames(false, "IN", "OUT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if blk < 0 || blk > 1<<30 {
				return usagef("bad --fsblksize %d: use 0 (the input's) or 1..%d", blk, 1<<30)
			}
			d := vfd.Sec2{}
			if err := inputFile(d, "IN", args[0], false); err != nil {
				return err
			}
			if err := outputFile(d, "OUT", args[1]); err != nil {
				return err
			}
			res, err := sionDefrag(d, args[0], args[1], int32(blk), a.sionProgress(jsonOut, "sion defrag"))
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			fmt.Fprintf(a.stdout, "%s: %d tasks, one block each\n", res.Container, len(res.Tasks))
			return nil
		},
	}
	c.Flags().IntVar(&blk, "fsblksize", 0, "alignment in bytes of the output (default: the input's)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

// sionProgress returns the progress constructor of a sion command: a
// byte-wise bar on a terminal, for inputs of at least progressMinBytes.
func (a *app) sionProgress(jsonOut bool, label string) func(total int64) *progress {
	return func(total int64) *progress {
		if total < a.progressMinBytes {
			return nil
		}
		return a.newProgress(jsonOut, label, total, true)
	}
}

func endianName(big bool) string {
	if big {
		return "big-endian"
	}
	return "little-endian"
}

// sionDumpResult is what sion dump prints.
type sionDumpResult struct {
	Container      string        `json:"container"`
	FileFormat     int32         `json:"fileformat"`
	Version        int32         `json:"library_version"`
	Patch          int32         `json:"library_patch"`
	BigEndian      bool          `json:"metadata_big_endian"`
	DataBigEndian  bool          `json:"data_big_endian"`
	FSBlkSize      int32         `json:"fsblksize"`
	NFiles         int           `json:"nfiles"`
	NTasks         int           `json:"ntasks"`
	KeyVal         string        `json:"keyval"`
	Prefix         string        `json:"prefix"`
	Files          []sionFile    `json:"files"`
	Tasks          []sionTask    `json:"tasks"`
	TotalBytes     int64         `json:"total_bytes"`
	UsedChunkBytes int64         `json:"used_chunk_bytes"`
	Mapping        []sionMapping `json:"mapping"`
}

// sionFile is one physical file of a container.
type sionFile struct {
	Name         string `json:"name"`
	Size         int64  `json:"size"`
	NTasks       int    `json:"ntasks"`
	FileNumber   int    `json:"filenumber"`
	MaxChunks    int    `json:"maxchunks"`
	GlobalSkip   int64  `json:"globalskip"`
	StartOfMeta2 int64  `json:"start_of_varheader"`
}

// sionTask is one task of a container with its blocks.
type sionTask struct {
	Task       int         `json:"task"`
	File       int         `json:"file"`
	LocalRank  int         `json:"local_rank"`
	GlobalRank int64       `json:"global_rank"`
	ChunkSize  int64       `json:"chunk_size"`
	Start      int64       `json:"start"`
	Bytes      int64       `json:"bytes"`
	Blocks     []sionBlock `json:"blocks"`
}

// sionBlock is one block of a task: where it starts and the bytes used.
type sionBlock struct {
	Block  int     `json:"block"`
	Offset int64   `json:"offset"`
	Bytes  int64   `json:"bytes"`
	Fill   float64 `json:"fill_percent"`
}

// sionMapping is one entry of a set's mapping: where a global rank lives.
type sionMapping struct {
	GlobalRank int   `json:"global_rank"`
	File       int32 `json:"file"`
	LocalRank  int32 `json:"local_rank"`
}

func sionDump(d vfd.Driver, name string) (*sionDumpResult, error) {
	r, err := sion.Open(d, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f0 := r.Files()[0]
	res := &sionDumpResult{Container: name, FileFormat: f0.FileFormat, Version: f0.Version, Patch: f0.Patch,
		BigEndian: f0.BigEndian, DataBigEndian: f0.DataBigEndian, FSBlkSize: f0.FSBlkSize, NFiles: f0.NFiles,
		NTasks: r.NTasks(), KeyVal: "none", Prefix: f0.Prefix, Files: []sionFile{}, Tasks: []sionTask{}, Mapping: []sionMapping{}}
	if r.KeyVal() {
		res.KeyVal = "inline"
	}
	for _, fi := range r.Files() {
		res.Files = append(res.Files, sionFile{Name: fi.Name, Size: fi.Size, NTasks: fi.NTasks, FileNumber: fi.FileNumber,
			MaxChunks: fi.MaxChunks, GlobalSkip: fi.GlobalSkip, StartOfMeta2: fi.StartOfMeta2})
	}
	for _, t := range r.Tasks() {
		st := sionTask{Task: t.Index, File: t.File, LocalRank: t.LocalRank, GlobalRank: t.GlobalRank, ChunkSize: t.ChunkSize,
			Start: t.Start, Bytes: t.Size, Blocks: []sionBlock{}}
		for b, size := range t.BlockSizes {
			fill := 0.0
			if t.ChunkSize > 0 {
				fill = 100 * float64(size) / float64(t.ChunkSize)
			}
			st.Blocks = append(st.Blocks, sionBlock{Block: b, Offset: t.Start + int64(b)*t.GlobalSkip, Bytes: size, Fill: fill})
		}
		res.Tasks = append(res.Tasks, st)
		res.TotalBytes += t.Size
		res.UsedChunkBytes += t.ChunkSize * int64(len(t.BlockSizes))
	}
	for g, e := range f0.Mapping {
		res.Mapping = append(res.Mapping, sionMapping{GlobalRank: g, File: e.File, LocalRank: e.LocalRank})
	}
	return res, nil
}

func printSionDump(w io.Writer, r *sionDumpResult) error {
	fmt.Fprintf(w, "container:   %s\n", r.Container)
	fmt.Fprintf(w, "fileformat:  %d (library version %d, patch %d)\n", r.FileFormat, r.Version, r.Patch)
	fmt.Fprintf(w, "metadata:    %s, user data declared %s\n", endianName(r.BigEndian), endianName(r.DataBigEndian))
	fmt.Fprintf(w, "fsblksize:   %d\n", r.FSBlkSize)
	fmt.Fprintf(w, "nfiles:      %d\n", r.NFiles)
	fmt.Fprintf(w, "ntasks:      %d\n", r.NTasks)
	fmt.Fprintf(w, "keyval:      %s\n", r.KeyVal)
	fmt.Fprintf(w, "prefix:      %q\n", r.Prefix)
	for k, fi := range r.Files {
		fmt.Fprintf(w, "file %d: %s  size %d  ntasks %d  filenumber %d  maxchunks %d  globalskip %d  start_of_varheader %d\n",
			k, fi.Name, fi.Size, fi.NTasks, fi.FileNumber, fi.MaxChunks, fi.GlobalSkip, fi.StartOfMeta2)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\tfile\tlrank\tglobalrank\tchunksize\tstart\tblocks\tbytes\t")
	for _, t := range r.Tasks {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", t.Task, t.File, t.LocalRank, t.GlobalRank, t.ChunkSize, t.Start, len(t.Blocks), t.Bytes)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\tblock\toffset\tbytes\tfill%\t")
	for _, t := range r.Tasks {
		for _, b := range t.Blocks {
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t\n", t.Task, b.Block, b.Offset, b.Bytes, b.Fill)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ntotal bytes: %d in %d bytes of used chunks\n", r.TotalBytes, r.UsedChunkBytes)
	if len(r.Mapping) > 0 {
		fmt.Fprintln(w, "\nmapping (global rank: file, local rank):")
		for _, m := range r.Mapping {
			fmt.Fprintf(w, "  %d: %d, %d\n", m.GlobalRank, m.File, m.LocalRank)
		}
	}
	return nil
}

// copyTo streams src into a new file dst through d and syncs it.
func copyTo(d vfd.Driver, dst string, src io.Reader) (int64, error) {
	f, err := vfd.CreateTrunc(d, dst)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	var off int64
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				return off, errors.Join(err, f.Close())
			}
			off += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return off, errors.Join(rerr, f.Close())
		}
	}
	if err := f.Sync(); err != nil {
		return off, errors.Join(err, f.Close())
	}
	return off, f.Close()
}

// splitFile is one file sion split wrote.
type splitFile struct {
	Path  string `json:"path"`
	Task  int    `json:"task"`
	Key   *int64 `json:"key,omitempty"`
	Bytes int64  `json:"bytes"`
}

func sionSplit(d vfd.Driver, name, prefix string, newProgress func(total int64) *progress) ([]splitFile, error) {
	r, err := sion.Open(d, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if dir := path.Dir(prefix); dir != "." {
		if err := d.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	var total int64
	for _, t := range r.Tasks() {
		total += t.Size
	}
	p := newProgress(total)
	defer p.Done()
	out := []splitFile{}
	for i := 0; i < r.NTasks(); i++ {
		if r.KeyVal() {
			recs, err := r.Records(i)
			if err != nil {
				return nil, err
			}
			seen := map[int64]bool{}
			for _, rec := range recs {
				if seen[rec.Key] {
					continue
				}
				seen[rec.Key] = true
				kr, _, err := r.KeyReader(i, rec.Key)
				if err != nil {
					return nil, err
				}
				name := fmt.Sprintf("%s%05d_%012d", prefix, i, rec.Key)
				n, err := copyTo(d, name, progressReader{kr, p})
				if err != nil {
					return nil, fmt.Errorf("write %s: %w", name, err)
				}
				out = append(out, splitFile{Path: name, Task: i, Key: &rec.Key, Bytes: n})
			}
			continue
		}
		sr, err := r.TaskReader(i)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%s%05d", prefix, i)
		n, err := copyTo(d, name, progressReader{sr, p})
		if err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
		out = append(out, splitFile{Path: name, Task: i, Bytes: n})
	}
	return out, nil
}

// writeStreams writes one container with one task per stream, each task a
// single block of exactly its size, counting the bytes on p.
func writeStreams(d vfd.Driver, out string, sizes, ranks []int64, o *sion.Options, p *progress, open func(i int) (io.Reader, func() error, error)) error {
	sw, err := sion.Create(d, out, sizes, ranks, o)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for i := range sizes {
		src, done, err := open(i)
		if err != nil {
			return errors.Join(err, sw.Abort())
		}
		n, err := io.CopyBuffer(sw.Task(i), progressReader{src, p}, buf)
		err = errors.Join(err, done())
		if err == nil && n != sizes[i] {
			err = fmt.Errorf("task %d: read %d bytes, expected %d", i, n, sizes[i])
		}
		if err != nil {
			return errors.Join(err, sw.Abort())
		}
	}
	return sw.Close()
}

// sionWritten is what sion pack and defrag print: the container and its tasks.
type sionWritten struct {
	Container string        `json:"container"`
	Tasks     []writtenTask `json:"tasks"`
	Bytes     int64         `json:"bytes"`
}

// writtenTask is one task of a written container and where it came from.
type writtenTask struct {
	Task       int    `json:"task"`
	GlobalRank int64  `json:"global_rank"`
	Input      string `json:"input"`
	Bytes      int64  `json:"bytes"`
}

func sionPack(d vfd.Driver, out string, blk int32, inputs []string, newProgress func(total int64) *progress) (*sionWritten, error) {
	res := &sionWritten{Container: out, Tasks: []writtenTask{}}
	sizes := make([]int64, len(inputs))
	for i, in := range inputs {
		st, err := d.Stat(in)
		if err != nil {
			return nil, err
		}
		if !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is %s, not a regular file: %w", in, kindOf(st.Mode()), vfd.ErrNotRegular)
		}
		sizes[i] = st.Size()
		res.Bytes += sizes[i]
		res.Tasks = append(res.Tasks, writtenTask{Task: i, GlobalRank: int64(i), Input: in, Bytes: sizes[i]})
	}
	p := newProgress(res.Bytes)
	defer p.Done()
	o := &sion.Options{FSBlkSize: blk, Policy: sion.PolicyFill}
	err := writeStreams(d, out, sizes, nil, o, p, func(i int) (io.Reader, func() error, error) {
		f, err := vfd.OpenRead(d, inputs[i])
		if err != nil {
			return nil, nil, err
		}
		return io.NewSectionReader(f, 0, sizes[i]), f.Close, nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func sionDefrag(d vfd.Driver, in, out string, blk int32, newProgress func(total int64) *progress) (*sionWritten, error) {
	r, err := sion.Open(d, in)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f0 := r.Files()[0]
	if blk == 0 {
		blk = f0.FSBlkSize
	}
	res := &sionWritten{Container: out, Tasks: []writtenTask{}}
	tasks := r.Tasks()
	sizes := make([]int64, len(tasks))
	ranks := make([]int64, len(tasks))
	for i, t := range tasks {
		sizes[i], ranks[i] = t.Size, t.GlobalRank
		res.Bytes += t.Size
		res.Tasks = append(res.Tasks, writtenTask{Task: i, GlobalRank: t.GlobalRank, Input: in, Bytes: t.Size})
	}
	p := newProgress(res.Bytes)
	defer p.Done()
	o := &sion.Options{FSBlkSize: blk, Policy: sion.PolicyFill, KeyVal: r.KeyVal(), BigEndian: f0.BigEndian,
		DataBigEndian: f0.DataBigEndian, Prefix: path.Base(out)}
	err = writeStreams(d, out, sizes, ranks, o, p, func(i int) (io.Reader, func() error, error) {
		sr, err := r.TaskReader(i)
		return sr, func() error { return nil }, err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
