package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/ftigo/ftigo/dhdf"
	"github.com/ftigo/ftigo/vfd"
)

func init() {
	register(command{name: "dhdf", summary: "list or verify a distributed HDF set (MHF + AHFs)", run: runDHDF})
}

const dhdfUsage = `usage: ftigo dhdf ls FILE
       ftigo dhdf verify FILE

FILE is the set's main file (MHF), e.g. out/sim.h5; its associated files
(sim.1.h5, ...) are looked up next to it.

ls      prints the set id, the File_Info table (file id, name, host), and
        for every distributed SDS its type, dimensions, attributes and chunk
        table (file id, chunk name, origin, dims).
verify  opens the set (every listed file present and of this set, HDF5
        metadata checksums, chunk tables against the virtual datasets) and
        reads every chunk, checking its CRC32C.

Exit codes: 0 success, 1 the set is incomplete, foreign or corrupt,
2 usage error.

Examples:
  ftigo dhdf ls out/sim.h5
  ftigo dhdf verify out/sim.h5 && echo ok
`

func runDHDF(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, dhdfUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, dhdfUsage)
		return 0
	case "ls", "verify":
	default:
		fmt.Fprintf(stderr, "ftigo dhdf: unknown subcommand %q\n\n%s", args[0], dhdfUsage)
		return 2
	}
	fs := flag.NewFlagSet("ftigo dhdf "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, dhdfUsage) }
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintf(stderr, "ftigo dhdf %s: want exactly one FILE\n\n%s", args[0], dhdfUsage)
		return 2
	}
	s, err := dhdf.Open(fs.Arg(0), dhdf.Options{Driver: vfd.Sec2{}})
	if err != nil {
		fmt.Fprintf(stderr, "ftigo dhdf %s: %v\n", args[0], err)
		return 1
	}
	defer s.Close()
	if args[0] == "ls" {
		dhdfList(s, stdout)
		return 0
	}
	return dhdfVerify(s, stdout, stderr)
}

func dhdfList(s *dhdf.Set, w io.Writer) {
	fmt.Fprintf(w, "set %q\n", s.SetID())
	fmt.Fprintln(w, "files:")
	for _, f := range s.Files() {
		fmt.Fprintf(w, "  %4d  %-30s %s\n", f.ID, f.Name, f.Host)
	}
	for _, x := range s.SDSs() {
		fmt.Fprintf(w, "sds %s: %s %s, %d chunks\n", x.Name, x.Type.Name(), dimsString(x.Dims), len(x.Chunks))
		for _, a := range x.Attrs {
			fmt.Fprintf(w, "  attr %s = %s\n", a.Name, a.String())
		}
		for _, c := range x.Chunks {
			fmt.Fprintf(w, "  chunk file %d %-24s origin %s dims %s\n", c.FileID, c.Name, dimsString(c.Origin), dimsString(c.Dims))
		}
	}
}

func dimsString(d []uint64) string {
	parts := make([]string, len(d))
	for i, v := range d {
		parts[i] = fmt.Sprint(v)
	}
	return "(" + strings.Join(parts, ",") + ")"
}

func dhdfVerify(s *dhdf.Set, stdout, stderr io.Writer) int {
	bad := 0
	chunks := 0
	for _, x := range s.SDSs() {
		for _, c := range x.Chunks {
			chunks++
			if _, err := s.ReadChunk(x.Name, c.Name); err != nil {
				fmt.Fprintf(stderr, "sds %s chunk %s: %v\n", x.Name, c.Name, err)
				bad++
			}
		}
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "ftigo dhdf verify: %d of %d chunks bad\n", bad, chunks)
		return 1
	}
	fmt.Fprintf(stdout, "ok: %d files, %d SDSs, %d chunks\n", len(s.Files()), len(s.SDSs()), chunks)
	return 0
}
