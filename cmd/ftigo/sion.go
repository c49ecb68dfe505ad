package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path"
	"text/tabwriter"

	"github.com/ftigo/ftigo/sion"
	"github.com/ftigo/ftigo/vfd"
)

func init() {
	register(command{name: "sion", summary: "inspect, split, pack and defragment SIONlib containers", run: runSion})
}

const sionUsage = `usage: ftigo sion <dump|split|pack|defrag> [arguments]

  dump FILE                        metadata and a per-task, per-block table (like siondump -a -l -m)
  split FILE PREFIX                one file per task, PREFIX00000, PREFIX00001, ... (like sionsplit);
                                   key-value containers give one file per task and key, PREFIX00000_000000000007
  pack -o OUT [-fsblksize N] FILE...
                                   task-local files into one container, task i = i-th FILE
  defrag [-fsblksize N] IN OUT     rewrite IN (a file or set, through file 0) as a single-file container
                                   with one block per task (like siondefrag)

Multi-file sets are opened through file 0; the siblings FILE.000001 ... must sit next to it.
Containers are written under OUT.tmp and renamed when complete.

examples:
  ftigo sion dump ckpt/l4.sion
  ftigo sion split ckpt/l4.sion out/task_
  ftigo sion pack -o all.sion -fsblksize 4096 rank0.fti rank1.fti rank2.fti
  ftigo sion defrag par2.sion one.sion

Exit codes: 0 success, 1 a problem was found (unreadable or corrupt container, I/O error), 2 usage error.
`

func runSion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, sionUsage)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, sionUsage)
		return 0
	}
	d := vfd.Sec2{}
	switch args[0] {
	case "dump":
		return sionCmd(args, stdout, stderr, 1, 1, nil, func(fs *flag.FlagSet) error { return sionDump(d, fs.Arg(0), stdout) })
	case "split":
		return sionCmd(args, stdout, stderr, 2, 2, nil, func(fs *flag.FlagSet) error { return sionSplit(d, fs.Arg(0), fs.Arg(1), stdout) })
	case "pack":
		var out string
		var blk int
		return sionCmd(args, stdout, stderr, 1, -1, func(fs *flag.FlagSet) {
			fs.StringVar(&out, "o", "", "output container (required)")
			fs.IntVar(&blk, "fsblksize", sion.DefaultFSBlkSize, "alignment in bytes")
		}, func(fs *flag.FlagSet) error {
			if out == "" {
				return usageError("pack needs -o OUT")
			}
			if blk <= 0 || blk > 1<<30 {
				return usageError(fmt.Sprintf("bad -fsblksize %d", blk))
			}
			return sionPack(d, out, int32(blk), fs.Args(), stdout)
		})
	case "defrag":
		var blk int
		return sionCmd(args, stdout, stderr, 2, 2, func(fs *flag.FlagSet) {
			fs.IntVar(&blk, "fsblksize", 0, "alignment in bytes of the output (default: the input's)")
		}, func(fs *flag.FlagSet) error {
			if blk < 0 || blk > 1<<30 {
				return usageError(fmt.Sprintf("bad -fsblksize %d", blk))
			}
			return sionDefrag(d, fs.Arg(0), fs.Arg(1), int32(blk), stdout)
		})
	}
	fmt.Fprintf(stderr, "ftigo sion: unknown subcommand %q\n\n%s", args[0], sionUsage)
	return 2
}

type usageError string

func (e usageError) Error() string { return string(e) }

// sionCmd parses a subcommand's flags, checks the positional argument
// count (maxArgs < 0: no limit) and runs it, mapping errors to exit codes.
func sionCmd(args []string, stdout, stderr io.Writer, minArgs, maxArgs int, setup func(*flag.FlagSet), do func(*flag.FlagSet) error) int {
	fs := flag.NewFlagSet("ftigo sion "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, sionUsage) }
	if setup != nil {
		setup(fs)
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, sionUsage)
			return 0
		}
		return 2
	}
	if fs.NArg() < minArgs || (maxArgs >= 0 && fs.NArg() > maxArgs) {
		fmt.Fprintf(stderr, "ftigo sion %s: wrong number of arguments\n\n%s", args[0], sionUsage)
		return 2
	}
	if err := do(fs); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "ftigo sion %s: %v\n", args[0], err)
			return 2
		}
		fmt.Fprintf(stderr, "ftigo sion %s: %v\n", args[0], err)
		return 1
	}
	return 0
}

func endianName(big bool) string {
	if big {
		return "big-endian"
	}
	return "little-endian"
}

func sionDump(d vfd.Driver, name string, w io.Writer) error {
	r, err := sion.Open(d, name)
	if err != nil {
		return err
	}
	defer r.Close()
	f0 := r.Files()[0]
	kv := "none"
	if r.KeyVal() {
		kv = "inline"
	}
	fmt.Fprintf(w, "container:   %s\n", name)
	fmt.Fprintf(w, "fileformat:  %d (library version %d, patch %d)\n", f0.FileFormat, f0.Version, f0.Patch)
	fmt.Fprintf(w, "metadata:    %s, user data declared %s\n", endianName(f0.BigEndian), endianName(f0.DataBigEndian))
	fmt.Fprintf(w, "fsblksize:   %d\n", f0.FSBlkSize)
	fmt.Fprintf(w, "nfiles:      %d\n", f0.NFiles)
	fmt.Fprintf(w, "ntasks:      %d\n", r.NTasks())
	fmt.Fprintf(w, "keyval:      %s\n", kv)
	fmt.Fprintf(w, "prefix:      %q\n", f0.Prefix)
	var total, chunkTotal int64
	for k, fi := range r.Files() {
		fmt.Fprintf(w, "file %d: %s  size %d  ntasks %d  filenumber %d  maxchunks %d  globalskip %d  start_of_varheader %d\n",
			k, fi.Name, fi.Size, fi.NTasks, fi.FileNumber, fi.MaxChunks, fi.GlobalSkip, fi.StartOfMeta2)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\tfile\tlrank\tglobalrank\tchunksize\tstart\tblocks\tbytes\t")
	for _, t := range r.Tasks() {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", t.Index, t.File, t.LocalRank, t.GlobalRank, t.ChunkSize, t.Start, len(t.BlockSizes), t.Size)
		total += t.Size
		chunkTotal += t.ChunkSize * int64(len(t.BlockSizes))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "task\tblock\toffset\tbytes\tfill%\t")
	for _, t := range r.Tasks() {
		for b, s := range t.BlockSizes {
			fill := 0.0
			if t.ChunkSize > 0 {
				fill = 100 * float64(s) / float64(t.ChunkSize)
			}
			fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%.1f\t\n", t.Index, b, t.Start+int64(b)*t.GlobalSkip, s, fill)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ntotal bytes: %d in %d bytes of used chunks\n", total, chunkTotal)
	if m := f0.Mapping; len(m) > 0 {
		fmt.Fprintln(w, "\nmapping (global rank: file, local rank):")
		for g, e := range m {
			fmt.Fprintf(w, "  %d: %d, %d\n", g, e.File, e.LocalRank)
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

func sionSplit(d vfd.Driver, name, prefix string, w io.Writer) error {
	r, err := sion.Open(d, name)
	if err != nil {
		return err
	}
	defer r.Close()
	if dir := path.Dir(prefix); dir != "." {
		if err := d.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	for i := 0; i < r.NTasks(); i++ {
		if r.KeyVal() {
			recs, err := r.Records(i)
			if err != nil {
				return err
			}
			seen := map[int64]bool{}
			for _, rec := range recs {
				if seen[rec.Key] {
					continue
				}
				seen[rec.Key] = true
				kr, _, err := r.KeyReader(i, rec.Key)
				if err != nil {
					return err
				}
				out := fmt.Sprintf("%s%05d_%012d", prefix, i, rec.Key)
				n, err := copyTo(d, out, kr)
				if err != nil {
					return fmt.Errorf("write %s: %w", out, err)
				}
				fmt.Fprintf(w, "%s %d\n", out, n)
			}
			continue
		}
		sr, err := r.TaskReader(i)
		if err != nil {
			return err
		}
		out := fmt.Sprintf("%s%05d", prefix, i)
		n, err := copyTo(d, out, sr)
		if err != nil {
			return fmt.Errorf("write %s: %w", out, err)
		}
		fmt.Fprintf(w, "%s %d\n", out, n)
	}
	return nil
}

// writeStreams writes one container with one task per stream, each task a
// single block of exactly its size.
func writeStreams(d vfd.Driver, out string, sizes, ranks []int64, o *sion.Options, open func(i int) (io.Reader, func() error, error)) error {
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
		n, err := io.CopyBuffer(sw.Task(i), src, buf)
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

func sionPack(d vfd.Driver, out string, blk int32, inputs []string, w io.Writer) error {
	sizes := make([]int64, len(inputs))
	for i, in := range inputs {
		st, err := d.Stat(in)
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("%s is a directory", in)
		}
		sizes[i] = st.Size()
	}
	o := &sion.Options{FSBlkSize: blk, Policy: sion.PolicyFill}
	err := writeStreams(d, out, sizes, nil, o, func(i int) (io.Reader, func() error, error) {
		f, err := vfd.OpenRead(d, inputs[i])
		if err != nil {
			return nil, nil, err
		}
		return io.NewSectionReader(f, 0, sizes[i]), f.Close, nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d tasks\n", out, len(inputs))
	return nil
}

func sionDefrag(d vfd.Driver, in, out string, blk int32, w io.Writer) error {
	r, err := sion.Open(d, in)
	if err != nil {
		return err
	}
	defer r.Close()
	f0 := r.Files()[0]
	if blk == 0 {
		blk = f0.FSBlkSize
	}
	tasks := r.Tasks()
	sizes := make([]int64, len(tasks))
	ranks := make([]int64, len(tasks))
	for i, t := range tasks {
		sizes[i], ranks[i] = t.Size, t.GlobalRank
	}
	o := &sion.Options{FSBlkSize: blk, Policy: sion.PolicyFill, KeyVal: r.KeyVal(), BigEndian: f0.BigEndian,
		DataBigEndian: f0.DataBigEndian, Prefix: path.Base(out)}
	err = writeStreams(d, out, sizes, ranks, o, func(i int) (io.Reader, func() error, error) {
		sr, err := r.TaskReader(i)
		return sr, func() error { return nil }, err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s: %d tasks, one block each\n", out, len(tasks))
	return nil
}
