package gsd

import (
	"fmt"
	"slices"
	"sort"

	"github.com/ftigo/ftigo/vfd"
)

// HOOMD schema identity. Wire format: never change.
const (
	HOOMDSchema = "hoomd"
)

// HOOMDSchemaVersion is the hoomd schema version written (1.4; gsd.hoomd
// 2.7 reads 1.0 ≤ v < 2.0).
const HOOMDSchemaVersion Version = 0x00010004

// HOOMDFrame is one frame of the hoomd schema. Nil fields are not written;
// readers then take frame 0's value (or the schema default), so write
// frame 0 fully and later frames only what changes. Step is always
// written.
type HOOMDFrame struct {
	Step        uint64
	Dimensions  uint8       // 2 or 3; 0 = not written
	Box         *[6]float32 // Lx, Ly, Lz, xy, xz, yz
	N           *uint32     // particles/N; set from Position when nil
	Types       []string    // particles/types, written as NUL-padded int8 rows
	TypeID      []uint32    // particles/typeid, N values
	Position    []float32   // particles/position, N×3
	Velocity    []float32   // particles/velocity, N×3
	Orientation []float32   // particles/orientation, N×4
	Image       []int32     // particles/image, N×3
	Mass        []float32   // particles/mass, N
	Charge      []float32   // particles/charge, N
	Diameter    []float32   // particles/diameter, N
	// Log holds log/... quantities by name without the "log/" prefix; the
	// value is a []T of a Numeric type, written N×1. A name first logged
	// after frame 0 is an error (gsd.hoomd would not find it).
	Log map[string]any
}

// HOOMDWriter writes hoomd-schema frames through a [Writer].
type HOOMDWriter struct {
	W    *Writer
	logs map[string]bool // log names of frame 0
}

// CreateHOOMD creates a hoomd-schema file (schema "hoomd" 1.4) that
// gsd.hoomd, HOOMD-blue and OVITO open.
func CreateHOOMD(d vfd.Driver, name, application string, opts ...Option) (*HOOMDWriter, error) {
	w, err := Create(d, name, application, HOOMDSchema, HOOMDSchemaVersion, opts...)
	if err != nil {
		return nil, err
	}
	return &HOOMDWriter{W: w}, nil
}

// Close closes the underlying Writer.
func (h *HOOMDWriter) Close() error { return h.W.Close() }

// WriteFrame writes f as the next frame and ends it.
func (h *HOOMDWriter) WriteFrame(f *HOOMDFrame) error {
	w := h.W
	frame0 := w.Frame() == 0
	if frame0 {
		h.logs = map[string]bool{}
		for k := range f.Log {
			h.logs[k] = true
		}
	} else {
		for k := range f.Log {
			if !h.logs[k] {
				return fmt.Errorf("gsd: hoomd frame %d: log/%s was not in frame 0: %w", w.Frame(), k, ErrSchema)
			}
		}
	}
	n := f.N
	if n == nil && f.Position != nil {
		if len(f.Position)%3 != 0 {
			return fmt.Errorf("gsd: hoomd frame %d: %d position values, not N×3: %w", w.Frame(), len(f.Position), ErrSchema)
		}
		v := uint32(len(f.Position) / 3)
		n = &v
	}
	if err := WriteChunk(w, "configuration/step", []uint64{f.Step}, 1, 1); err != nil {
		return err
	}
	if f.Dimensions != 0 {
		if err := WriteChunk(w, "configuration/dimensions", []uint8{f.Dimensions}, 1, 1); err != nil {
			return err
		}
	}
	if f.Box != nil {
		if err := WriteChunk(w, "configuration/box", f.Box[:], 6, 1); err != nil {
			return err
		}
	}
	if n != nil {
		if err := WriteChunk(w, "particles/N", []uint32{*n}, 1, 1); err != nil {
			return err
		}
	}
	if f.Types != nil {
		width := 1
		for _, t := range f.Types {
			width = max(width, len(t)+1)
		}
		rows := make([]int8, len(f.Types)*width)
		for i, t := range f.Types {
			for j := 0; j < len(t); j++ {
				rows[i*width+j] = int8(t[j])
			}
		}
		if err := WriteChunk(w, "particles/types", rows, uint64(len(f.Types)), uint32(width)); err != nil {
			return err
		}
	}
	var np uint64
	if n != nil {
		np = uint64(*n)
	}
	perParticle := func(name string, m uint32, data any) error {
		if data == nil {
			return nil
		}
		switch v := data.(type) {
		case []float32:
			if v == nil {
				return nil
			}
			return writeRows(w, name, v, np, m)
		case []uint32:
			if v == nil {
				return nil
			}
			return writeRows(w, name, v, np, m)
		case []int32:
			if v == nil {
				return nil
			}
			return writeRows(w, name, v, np, m)
		}
		return nil
	}
	for _, c := range []struct {
		name string
		m    uint32
		data any
	}{
		{"particles/typeid", 1, f.TypeID},
		{"particles/mass", 1, f.Mass},
		{"particles/charge", 1, f.Charge},
		{"particles/diameter", 1, f.Diameter},
		{"particles/position", 3, f.Position},
		{"particles/orientation", 4, f.Orientation},
		{"particles/velocity", 3, f.Velocity},
		{"particles/image", 3, f.Image},
	} {
		if err := perParticle(c.name, c.m, c.data); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(f.Log))
	for k := range f.Log {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := writeAny(w, "log/"+k, f.Log[k]); err != nil {
			return err
		}
	}
	return w.EndFrame()
}

func writeRows[T Numeric](w *Writer, name string, v []T, n uint64, m uint32) error {
	if uint64(len(v)) != n*uint64(m) {
		return fmt.Errorf("gsd: hoomd frame %d: %s has %d values, want %d×%d: %w", w.Frame(), name, len(v), n, m, ErrSchema)
	}
	return WriteChunk(w, name, v, n, m)
}

// writeAny writes a []T of any Numeric type as an N×1 chunk.
func writeAny(w *Writer, name string, v any) error {
	switch s := v.(type) {
	case []uint8:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []uint16:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []uint32:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []uint64:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []int8:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []int16:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []int32:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []int64:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []float32:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	case []float64:
		return WriteChunk(w, name, s, uint64(len(s)), 1)
	}
	return fmt.Errorf("gsd: hoomd frame %d: %s: value of type %T is not a numeric slice: %w", w.Frame(), name, v, ErrSchema)
}

// HOOMDTypes decodes a particles/types chunk (NUL-padded int8 rows).
func HOOMDTypes(r *Reader, frame uint64) ([]string, error) {
	rows, e, err := ReadChunk[int8](r, frame, "particles/types")
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, e.N)
	for i := uint64(0); i < e.N; i++ {
		row := rows[i*uint64(e.M) : (i+1)*uint64(e.M)]
		b := make([]byte, 0, len(row))
		for _, c := range row {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		out = append(out, string(b))
	}
	return slices.Clip(out), nil
}
