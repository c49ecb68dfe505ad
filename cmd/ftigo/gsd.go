package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

func init() {
	register(command{name: "gsd", summary: "dump, verify or repair a GSD trajectory file", run: runGSD})
}

const gsdUsage = `usage: ftigo gsd dump [--values N] [--frame F] FILE
       ftigo gsd verify FILE
       ftigo gsd repair FILE

dump    prints the header, the chunk names and every chunk of every frame
        (type, N×M, offset and the first N values, default 4).
verify  checks every index entry against what breaks GSD readers
        (python3-gsd, HOOMD, OVITO); exit 1 with the problems if any.
repair  keeps the longest prefix of complete frames whose data is in the
        file and writes a fresh index, so python3-gsd opens it again.

Exit codes: 0 success, 1 the file is invalid or could not be repaired,
2 usage error.

Examples:
  ftigo gsd dump --values 8 traj.gsd
  ftigo gsd verify traj.gsd && echo ok
`

func runGSD(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, gsdUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, gsdUsage)
		return 0
	case "dump", "verify", "repair":
	default:
		fmt.Fprintf(stderr, "ftigo gsd: unknown subcommand %q\n\n%s", args[0], gsdUsage)
		return 2
	}
	fs := flag.NewFlagSet("ftigo gsd "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, gsdUsage) }
	values := fs.Int("values", 4, "values shown per chunk (dump)")
	frame := fs.Int64("frame", -1, "dump only this frame")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "ftigo gsd %s: want exactly one FILE\n\n%s", args[0], gsdUsage)
		return 2
	}
	name := fs.Arg(0)
	d := vfd.Sec2{}
	switch args[0] {
	case "dump":
		return gsdDump(d, name, *values, *frame, stdout, stderr)
	case "verify":
		return gsdVerify(d, name, stdout, stderr)
	default:
		return gsdRepair(d, name, stdout, stderr)
	}
}

func gsdDump(d vfd.Driver, name string, values int, only int64, stdout, stderr io.Writer) int {
	r, err := gsd.Open(d, name)
	if err != nil {
		fmt.Fprintf(stderr, "ftigo gsd dump: %v\n", err)
		return 1
	}
	defer r.Close()
	h := r.Header()
	names := r.ChunkNames("")
	fmt.Fprintf(stdout, "file %s: GSD %s, application %q, schema %q %s\n", name, h.GSDVersion, h.Application, h.Schema, h.SchemaVersion)
	fmt.Fprintf(stdout, "size %d bytes, index @%d (%d slots, %d used), namelist @%d (%d bytes, %d names)\n",
		r.Size(), h.IndexLocation, h.IndexAllocated, len(r.Entries()), h.NameLocation, h.NameAllocated*64, len(names))
	fmt.Fprintf(stdout, "frames %d\n", r.NFrames())
	for _, e := range r.Entries() {
		if only >= 0 && e.Frame != uint64(only) {
			continue
		}
		n := r.Name(e.ID)
		fmt.Fprintf(stdout, "frame %d  %-30s %-7s %d×%d @%d", e.Frame, n, e.Type, e.N, e.M, e.Location)
		if values > 0 && e.N > 0 {
			rows := min(e.N, uint64(values)/uint64(e.M)+1)
			b, err := r.ReadRowsRaw(e.Frame, n, 0, rows)
			if err != nil {
				fmt.Fprintf(stdout, "\n")
				fmt.Fprintf(stderr, "ftigo gsd dump: %v\n", err)
				return 1
			}
			fmt.Fprintf(stdout, "  %s", formatValues(b, e.Type, values, e.N*uint64(e.M)))
		}
		fmt.Fprintln(stdout)
	}
	return 0
}

// formatValues renders the first max values of little-endian data of type t.
func formatValues(b []byte, t gsd.Type, max int, total uint64) string {
	size := t.Size()
	var parts []string
	for i := 0; i+size <= len(b) && len(parts) < max; i += size {
		v := b[i : i+size]
		le := binary.LittleEndian
		var s string
		switch t {
		case gsd.TypeUint8:
			s = fmt.Sprint(v[0])
		case gsd.TypeInt8:
			s = fmt.Sprint(int8(v[0]))
		case gsd.TypeCharacter:
			s = fmt.Sprintf("%q", v[0])
		case gsd.TypeUint16:
			s = fmt.Sprint(le.Uint16(v))
		case gsd.TypeInt16:
			s = fmt.Sprint(int16(le.Uint16(v)))
		case gsd.TypeUint32:
			s = fmt.Sprint(le.Uint32(v))
		case gsd.TypeInt32:
			s = fmt.Sprint(int32(le.Uint32(v)))
		case gsd.TypeUint64:
			s = fmt.Sprint(le.Uint64(v))
		case gsd.TypeInt64:
			s = fmt.Sprint(int64(le.Uint64(v)))
		case gsd.TypeFloat32:
			s = fmt.Sprint(math.Float32frombits(le.Uint32(v)))
		case gsd.TypeFloat64:
			s = fmt.Sprint(math.Float64frombits(le.Uint64(v)))
		}
		parts = append(parts, s)
	}
	out := "[" + strings.Join(parts, " ")
	if uint64(len(parts)) < total {
		out += " ..."
	}
	return out + "]"
}

func gsdVerify(d vfd.Driver, name string, stdout, stderr io.Writer) int {
	if err := gsd.Verify(d, name); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stdout, "INVALID %s\n", line)
		}
		return 1
	}
	r, err := gsd.Open(d, name)
	if err != nil {
		fmt.Fprintf(stdout, "INVALID %v\n", err)
		return 1
	}
	defer r.Close()
	fmt.Fprintf(stdout, "VALID %s: GSD %s, %d frames, %d chunks, %d names\n", name, r.Version(), r.NFrames(), len(r.Entries()), len(r.ChunkNames("")))
	return 0
}

func gsdRepair(d vfd.Driver, name string, stdout, stderr io.Writer) int {
	res, err := gsd.Repair(d, name)
	if err != nil {
		fmt.Fprintf(stderr, "ftigo gsd repair: %v\n", err)
		return 1
	}
	if !res.Changed {
		fmt.Fprintf(stdout, "%s: valid, left unchanged (%d frames)\n", name, res.Frames)
		return 0
	}
	fmt.Fprintf(stdout, "%s: repaired: kept %d frames (%d entries), dropped %d entries\n", name, res.Frames, res.Entries, res.Dropped)
	if res.Reason != "" {
		fmt.Fprintf(stdout, "reason: %s\n", res.Reason)
	}
	return 0
}
