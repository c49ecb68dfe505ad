package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ftigo/ftigo/gsd"
	"github.com/ftigo/ftigo/vfd"
)

func (a *app) gsdCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "gsd",
		Short: "dump, verify or repair a GSD trajectory file",
		Long: `Works with GSD 2.0 trajectory files as python3-gsd, HOOMD and OVITO read them.

Exit codes: 0 success, 1 the file is invalid or could not be repaired,
2 usage error.`,
		Example: `  ftigo gsd dump --values 8 traj.gsd
  ftigo gsd verify traj.gsd && echo ok
  ftigo gsd repair traj.gsd --json`,
	}
	a.group(c)
	c.AddCommand(a.gsdDumpCmd(), a.gsdVerifyCmd(), a.gsdRepairCmd())
	return c
}

func (a *app) gsdDumpCmd() *cobra.Command {
	var jsonOut bool
	var values int
	var frame int64
	c := &cobra.Command{
		Use:   "dump FILE",
		Short: "the header, the chunk names and every chunk of every frame",
		Long: `Prints the header, the chunk names and every chunk of every frame: type,
N×M, offset and the first values (--values, default 4).

Exit codes: 0 success, 1 the file is unreadable or invalid, 2 usage error.`,
		Example: `  ftigo gsd dump traj.gsd
  ftigo gsd dump traj.gsd --frame 3 --values 8
  ftigo gsd dump traj.gsd --json`,
		Args: argNames(false, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if values < 0 {
				return usagef("--values %d: must not be negative", values)
			}
			d := vfd.Sec2{}
			if err := inputFile(d, "FILE", args[0], false); err != nil {
				return err
			}
			res, err := gsdDump(d, args[0], values, frame)
			if err != nil {
				return err
			}
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			printGSDDump(a.stdout, res)
			return nil
		},
	}
	c.Flags().IntVar(&values, "values", 4, "values shown per chunk")
	c.Flags().Int64Var(&frame, "frame", -1, "dump only this frame (-1: all)")
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

func (a *app) gsdVerifyCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "verify FILE",
		Short: "check every index entry against what breaks GSD readers",
		Long: `Checks the header, the namelist and every index entry against what breaks
GSD readers (python3-gsd, HOOMD, OVITO) and prints VALID with a summary or
INVALID with each problem.

Exit codes: 0 the file is valid, 1 it is not (or cannot be read), 2 usage error.`,
		Example: `  ftigo gsd verify traj.gsd && echo ok
  ftigo gsd verify traj.gsd --json`,
		Args: argNames(false, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := vfd.Sec2{}
			if err := inputFile(d, "FILE", args[0], false); err != nil {
				return err
			}
			res := gsdVerify(d, args[0])
			if jsonOut {
				if err := writeJSON(a.stdout, res); err != nil {
					return err
				}
			} else if res.Valid {
				fmt.Fprintf(a.stdout, "VALID %s: GSD %s, %d frames, %d chunks, %d names\n", res.File, res.Version, res.Frames, res.Chunks, res.Names)
			} else {
				for _, p := range res.Problems {
					fmt.Fprintf(a.stdout, "INVALID %s\n", p)
				}
			}
			if !res.Valid {
				return exitStatus(1)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

func (a *app) gsdRepairCmd() *cobra.Command {
	var jsonOut bool
	c := &cobra.Command{
		Use:   "repair FILE",
		Short: "keep the complete frames and write a fresh index",
		Long: `Keeps the longest prefix of complete frames whose data is in the file and
writes a fresh index, so python3-gsd opens the file again. A valid file is
left unchanged.

Exit codes: 0 the file is valid or was repaired, 1 it could not be repaired,
2 usage error.`,
		Example: `  ftigo gsd repair traj.gsd
  ftigo gsd repair traj.gsd --json`,
		Args: argNames(false, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			d := vfd.Sec2{}
			name := args[0]
			if err := inputFile(d, "FILE", name, false); err != nil {
				return err
			}
			r, err := gsd.Repair(d, name)
			if err != nil {
				return err
			}
			res := gsdRepairResult{File: name, Changed: r.Changed, Frames: r.Frames, Entries: r.Entries, Dropped: r.Dropped, Reason: r.Reason}
			if jsonOut {
				return writeJSON(a.stdout, res)
			}
			if !res.Changed {
				fmt.Fprintf(a.stdout, "%s: valid, left unchanged (%d frames)\n", name, res.Frames)
				return nil
			}
			fmt.Fprintf(a.stdout, "%s: repaired: kept %d frames (%d entries), dropped %d entries\n", name, res.Frames, res.Entries, res.Dropped)
			if res.Reason != "" {
				fmt.Fprintf(a.stdout, "reason: %s\n", res.Reason)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&jsonOut, "json", false, "print the result as JSON")
	return c
}

// gsdDumpResult is what gsd dump prints.
type gsdDumpResult struct {
	File           string     `json:"file"`
	GSDVersion     string     `json:"gsd_version"`
	Application    string     `json:"application"`
	Schema         string     `json:"schema"`
	SchemaVersion  string     `json:"schema_version"`
	Size           int64      `json:"size"`
	IndexLocation  int64      `json:"index_location"`
	IndexAllocated uint64     `json:"index_allocated"`
	IndexUsed      int        `json:"index_used"`
	NameLocation   int64      `json:"name_location"`
	NameBytes      uint64     `json:"name_bytes"`
	Names          []string   `json:"names"`
	Frames         uint64     `json:"frames"`
	Chunks         []gsdChunk `json:"chunks"`
}

// gsdChunk is one index entry with its first values.
type gsdChunk struct {
	Frame    uint64 `json:"frame"`
	Name     string `json:"name"`
	Type     string `json:"type"`
	N        uint64 `json:"n"`
	M        uint32 `json:"m"`
	Location int64  `json:"location"`
	// Values are the first values, row-major; More says there are more.
	Values []any `json:"values"`
	More   bool  `json:"more"`
}

func gsdDump(d vfd.Driver, name string, values int, only int64) (*gsdDumpResult, error) {
	r, err := gsd.Open(d, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := r.Header()
	res := &gsdDumpResult{File: name, GSDVersion: h.GSDVersion.String(), Application: h.Application, Schema: h.Schema,
		SchemaVersion: h.SchemaVersion.String(), Size: r.Size(), IndexLocation: h.IndexLocation, IndexAllocated: h.IndexAllocated,
		IndexUsed: len(r.Entries()), NameLocation: h.NameLocation, NameBytes: h.NameAllocated * 64,
		Names: nonNil(r.ChunkNames("")), Frames: r.NFrames(), Chunks: []gsdChunk{}}
	for _, e := range r.Entries() {
		if only >= 0 && e.Frame != uint64(only) {
			continue
		}
		c := gsdChunk{Frame: e.Frame, Name: r.Name(e.ID), Type: e.Type.String(), N: e.N, M: e.M, Location: e.Location, Values: []any{}}
		if values > 0 && e.N > 0 && e.M > 0 {
			rows := min(e.N, uint64(values)/uint64(e.M)+1)
			b, err := r.ReadRowsRaw(e.Frame, c.Name, 0, rows)
			if err != nil {
				return nil, err
			}
			c.Values = decodeValues(b, e.Type, values)
			c.More = uint64(len(c.Values)) < e.N*uint64(e.M)
		}
		res.Chunks = append(res.Chunks, c)
	}
	return res, nil
}

func printGSDDump(w io.Writer, r *gsdDumpResult) {
	fmt.Fprintf(w, "file %s: GSD %s, application %q, schema %q %s\n", r.File, r.GSDVersion, r.Application, r.Schema, r.SchemaVersion)
	fmt.Fprintf(w, "size %d bytes, index @%d (%d slots, %d used), namelist @%d (%d bytes, %d names)\n",
		r.Size, r.IndexLocation, r.IndexAllocated, r.IndexUsed, r.NameLocation, r.NameBytes, len(r.Names))
	fmt.Fprintf(w, "frames %d\n", r.Frames)
	for _, c := range r.Chunks {
		fmt.Fprintf(w, "frame %d  %-30s %-7s %d×%d @%d", c.Frame, c.Name, c.Type, c.N, c.M, c.Location)
		if len(c.Values) > 0 {
			fmt.Fprintf(w, "  %s", formatValues(c.Values, c.More))
		}
		fmt.Fprintln(w)
	}
}

// gsdVerifyResult is what gsd verify prints.
type gsdVerifyResult struct {
	File     string   `json:"file"`
	Valid    bool     `json:"valid"`
	Problems []string `json:"problems"`
	Version  string   `json:"gsd_version,omitempty"`
	Frames   uint64   `json:"frames"`
	Chunks   int      `json:"chunks"`
	Names    int      `json:"names"`
}

func gsdVerify(d vfd.Driver, name string) gsdVerifyResult {
	res := gsdVerifyResult{File: name, Problems: []string{}}
	if err := gsd.Verify(d, name); err != nil {
		res.Problems = strings.Split(err.Error(), "\n")
		return res
	}
	r, err := gsd.Open(d, name)
	if err != nil {
		res.Problems = []string{err.Error()}
		return res
	}
	defer r.Close()
	res.Valid, res.Version, res.Frames, res.Chunks, res.Names = true, r.Version().String(), r.NFrames(), len(r.Entries()), len(r.ChunkNames(""))
	return res
}

// gsdRepairResult is what gsd repair prints.
type gsdRepairResult struct {
	File    string `json:"file"`
	Changed bool   `json:"changed"`
	Frames  uint64 `json:"frames"`
	Entries int    `json:"entries"`
	Dropped int    `json:"dropped"`
	Reason  string `json:"reason"`
}

// jsonFloat is a float64 value that JSON encodes as a number when finite
// and as the string "NaN", "+Inf" or "-Inf" otherwise (JSON has no such
// numbers).
type jsonFloat float64

// MarshalJSON encodes f as a number, or a string when it is not finite.
func (f jsonFloat) MarshalJSON() ([]byte, error) { return marshalFloat(float64(f), 64) }

// jsonFloat32 is jsonFloat for float32 values.
type jsonFloat32 float32

// MarshalJSON encodes f as a number, or a string when it is not finite.
func (f jsonFloat32) MarshalJSON() ([]byte, error) { return marshalFloat(float64(f), 32) }

func marshalFloat(v float64, bits int) ([]byte, error) {
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	if bits == 32 {
		return json.Marshal(float32(v))
	}
	return json.Marshal(v)
}

// decodeValues decodes the first max values of little-endian data of
// type t: integers as Go integers, floats as jsonFloat/jsonFloat32,
// characters as one-character strings.
func decodeValues(b []byte, t gsd.Type, max int) []any {
	size := t.Size()
	out := []any{}
	if size == 0 {
		return out
	}
	le := binary.LittleEndian
	for i := 0; i+size <= len(b) && len(out) < max; i += size {
		v := b[i : i+size]
		var x any
		switch t {
		case gsd.TypeUint8:
			x = v[0]
		case gsd.TypeInt8:
			x = int8(v[0])
		case gsd.TypeCharacter:
			x = string(rune(v[0]))
		case gsd.TypeUint16:
			x = le.Uint16(v)
		case gsd.TypeInt16:
			x = int16(le.Uint16(v))
		case gsd.TypeUint32:
			x = le.Uint32(v)
		case gsd.TypeInt32:
			x = int32(le.Uint32(v))
		case gsd.TypeUint64:
			x = le.Uint64(v)
		case gsd.TypeInt64:
			x = int64(le.Uint64(v))
		case gsd.TypeFloat32:
			x = jsonFloat32(math.Float32frombits(le.Uint32(v)))
		case gsd.TypeFloat64:
			x = jsonFloat(math.Float64frombits(le.Uint64(v)))
		default:
			return out
		}
		out = append(out, x)
	}
	return out
}

// formatValues renders decoded values as "[v1 v2 ...]", with "..." when
// there are more.
func formatValues(vs []any, more bool) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		switch x := v.(type) {
		case string:
			parts[i] = fmt.Sprintf("%q", []rune(x)[0])
		case jsonFloat:
			parts[i] = fmt.Sprint(float64(x))
		case jsonFloat32:
			parts[i] = fmt.Sprint(float32(x))
		default:
			parts[i] = fmt.Sprint(x)
		}
	}
	out := "[" + strings.Join(parts, " ")
	if more {
		out += " ..."
	}
	return out + "]"
}
