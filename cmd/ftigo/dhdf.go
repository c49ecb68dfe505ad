package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/dhdf"
	"github.com/ftigo/ftigo/vfd"
)

func (a *app) dhdfCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "dhdf",
		Short: "list or verify a distributed HDF set (MHF + AHFs)",
		Long: `Works with distributed HDF sets: FILE is the set's main file (MHF), e.g.
out/sim.h5; its associated files (sim.1.h5, ...) are looked up next to it.

Exit codes: 0 success, 1 the set is incomplete, foreign or corrupt,
2 usage error.`,
		Example: `  ftigo dhdf ls out/sim.h5
  ftigo dhdf verify out/sim.h5 && echo ok`,
	}
	a.group(c)
	c.AddCommand(a.dhdfLsCmd(), a.dhdfVerifyCmd())
	return c
}

// openSet checks the MHF argument and opens the set.
func openSet(name string) (*dhdf.Set, error) {
	d := vfd.Sec2{}
	if err := inputFile(d, "FILE", name, false); err != nil {
		return nil, err
	}
	return dhdf.Open(name, dhdf.Options{Driver: d})
}

func (a *app) dhdfLsCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "ls FILE",
		Short: "the set's files and every distributed SDS with its chunk table",
		Long: `Prints the set id, the File_Info table (file id, name, host), and for
every distributed SDS its type, dimensions, attributes and chunk table
(file id, chunk name, origin, dims).

Exit codes: 0 success, 1 the set is incomplete, foreign or corrupt, 2 usage error.`,
		Example: `  ftigo dhdf ls out/sim.h5
  ftigo dhdf ls out/sim.h5 --json`,
		Args: argNames(false, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSet(args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			res := dhdfList(s)
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			printDHDFList(a.stdout, res)
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

func (a *app) dhdfVerifyCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "verify FILE",
		Short: "open the set and read every chunk, checking its CRC32C",
		Long: `Opens the set (every listed file present and of this set, HDF5 metadata
checksums, chunk tables against the virtual datasets) and reads every
chunk, checking its CRC32C; each bad chunk is named on standard error.

Exit codes: 0 everything verifies, 1 the set is incomplete, foreign or
corrupt, 2 usage error.`,
		Example: `  ftigo dhdf verify out/sim.h5 && echo ok
  ftigo dhdf verify out/sim.h5 --json`,
		Args: argNames(false, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := openSet(args[0])
			if err != nil {
				return err
			}
			defer s.Close()
			res := dhdfVerify(s)
			if jsonOut {
				if err := writeJSON(a.stdout, res); err != nil {
					return err
				}
			} else {
				for _, b := range res.Bad {
					fmt.Fprintf(a.stderr, "sds %s chunk %s: %s\n", b.SDS, b.Chunk, b.Error)
				}
				if res.OK {
					fmt.Fprintf(a.stdout, "ok: %d files, %d SDSs, %d chunks\n", res.Files, res.SDSs, res.Chunks)
				} else {
					fmt.Fprintf(a.stderr, "%s: %d of %d chunks bad\n", cmd.CommandPath(), len(res.Bad), res.Chunks)
				}
			}
			if !res.OK {
				return exitStatus(1)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

// dhdfListResult is what dhdf ls prints.
type dhdfListResult struct {
	Set   string         `json:"set"`
	Files []dhdfFileJSON `json:"files"`
	SDSs  []dhdfSDSJSON  `json:"sds"`
}

type dhdfFileJSON struct {
	ID   int32  `json:"id"`
	Name string `json:"name"`
	Host string `json:"host"`
}

type dhdfSDSJSON struct {
	Name   string          `json:"name"`
	Type   string          `json:"type"`
	Dims   []uint64        `json:"dims"`
	Attrs  []dhdfAttrJSON  `json:"attrs"`
	Chunks []dhdfChunkJSON `json:"chunks"`
}

type dhdfAttrJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type dhdfChunkJSON struct {
	FileID int32    `json:"file_id"`
	Name   string   `json:"name"`
	Origin []uint64 `json:"origin"`
	Dims   []uint64 `json:"dims"`
}

func dhdfList(s *dhdf.Set) dhdfListResult {
	res := dhdfListResult{Set: s.SetID(), Files: []dhdfFileJSON{}, SDSs: []dhdfSDSJSON{}}
	for _, f := range s.Files() {
		res.Files = append(res.Files, dhdfFileJSON{ID: f.ID, Name: f.Name, Host: f.Host})
	}
	for _, x := range s.SDSs() {
		sj := dhdfSDSJSON{Name: x.Name, Type: x.Type.Name(), Dims: nonNil(x.Dims), Attrs: []dhdfAttrJSON{}, Chunks: []dhdfChunkJSON{}}
		for _, at := range x.Attrs {
			sj.Attrs = append(sj.Attrs, dhdfAttrJSON{Name: at.Name, Value: at.String()})
		}
		for _, c := range x.Chunks {
			sj.Chunks = append(sj.Chunks, dhdfChunkJSON{FileID: c.FileID, Name: c.Name, Origin: nonNil(c.Origin), Dims: nonNil(c.Dims)})
		}
		res.SDSs = append(res.SDSs, sj)
	}
	return res
}

func printDHDFList(w io.Writer, r dhdfListResult) {
	fmt.Fprintf(w, "set %q\n", r.Set)
	fmt.Fprintln(w, "files:")
	for _, f := range r.Files {
		fmt.Fprintf(w, "  %4d  %-30s %s\n", f.ID, f.Name, f.Host)
	}
	for _, x := range r.SDSs {
		fmt.Fprintf(w, "sds %s: %s %s, %d chunks\n", x.Name, x.Type, dimsString(x.Dims), len(x.Chunks))
		for _, at := range x.Attrs {
			fmt.Fprintf(w, "  attr %s = %s\n", at.Name, at.Value)
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

// dhdfVerifyResult is what dhdf verify prints.
type dhdfVerifyResult struct {
	OK     bool           `json:"ok"`
	Files  int            `json:"files"`
	SDSs   int            `json:"sds"`
	Chunks int            `json:"chunks"`
	Bad    []dhdfBadChunk `json:"bad"`
}

// dhdfBadChunk is a chunk that could not be read or failed its checksum.
// Chunks are read in pieces (dhdf.Set.VerifyChunk), so a chunk of any size
// is checked.
type dhdfBadChunk struct {
	SDS   string `json:"sds"`
	Chunk string `json:"chunk"`
	Error string `json:"error"`
}

func dhdfVerify(s *dhdf.Set) dhdfVerifyResult {
	res := dhdfVerifyResult{Files: len(s.Files()), SDSs: len(s.SDSs()), Bad: []dhdfBadChunk{}}
	for _, x := range s.SDSs() {
		for _, c := range x.Chunks {
			res.Chunks++
			if err := s.VerifyChunk(c); err != nil {
				res.Bad = append(res.Bad, dhdfBadChunk{SDS: x.Name, Chunk: c.Name, Error: err.Error()})
			}
		}
	}
	res.OK = len(res.Bad) == 0
	return res
}
