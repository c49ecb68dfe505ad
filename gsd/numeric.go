package gsd

import (
	"fmt"
	"unsafe"
)

// Numeric is the set of Go element types that map to GSD types 1..10.
type Numeric interface {
	uint8 | uint16 | uint32 | uint64 | int8 | int16 | int32 | int64 | float32 | float64
}

// TypeOf returns the GSD type of T.
func TypeOf[T Numeric]() Type {
	var z T
	switch any(z).(type) {
	case uint8:
		return TypeUint8
	case uint16:
		return TypeUint16
	case uint32:
		return TypeUint32
	case uint64:
		return TypeUint64
	case int8:
		return TypeInt8
	case int16:
		return TypeInt16
	case int32:
		return TypeInt32
	case int64:
		return TypeInt64
	case float32:
		return TypeFloat32
	default:
		return TypeFloat64
	}
}

// rawView returns the memory of s as bytes, without copying.
func rawView[T Numeric](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// WriteChunk writes data as an n×m chunk called name into the current frame
// of w. len(data) must be n·m; a 1-D slice is n×1.
func WriteChunk[T Numeric](w *Writer, name string, data []T, n uint64, m uint32) error {
	if uint64(len(data)) != n*uint64(m) || (m == 0) {
		return fmt.Errorf("gsd: write %q: %d values for %d×%d: %w", name, len(data), n, m, ErrShape)
	}
	t := TypeOf[T]()
	return w.writeChunk(name, t, n, m, encodeLE(data, t))
}

// ReadChunk reads the whole chunk name of frame as []T. T must match the
// stored type (ErrType otherwise). It also returns the entry (N, M).
func ReadChunk[T Numeric](r *Reader, frame uint64, name string) ([]T, Entry, error) {
	e, err := r.ChunkInfo(frame, name)
	if err != nil {
		return nil, e, err
	}
	out, err := ReadRows[T](r, frame, name, 0, e.N)
	return out, e, err
}

// ReadRows reads rows [row, row+count) of chunk name in frame as []T
// (count·M values).
func ReadRows[T Numeric](r *Reader, frame uint64, name string, row, count uint64) ([]T, error) {
	return ReadRowsInto[T](r, frame, name, row, count, nil)
}

// ReadChunkInto is [ReadChunk] reading into dst's memory when its capacity
// suffices (a new slice otherwise), so a loop over frames allocates once.
// The result aliases dst.
func ReadChunkInto[T Numeric](r *Reader, frame uint64, name string, dst []T) ([]T, Entry, error) {
	e, err := r.ChunkInfo(frame, name)
	if err != nil {
		return nil, e, err
	}
	out, err := ReadRowsInto(r, frame, name, 0, e.N, dst)
	return out, e, err
}

// ReadRowsInto is [ReadRows] reading into dst's memory when its capacity
// suffices. The result aliases dst.
func ReadRowsInto[T Numeric](r *Reader, frame uint64, name string, row, count uint64, dst []T) ([]T, error) {
	e, off, n, err := r.rowSpan(frame, name, row, count)
	if err != nil {
		return nil, err
	}
	t := TypeOf[T]()
	if e.Type != t && !(e.Type == TypeCharacter && t.Size() == 1) {
		return nil, fmt.Errorf("gsd: %s: frame %d, chunk %q is %s, not %s: %w", pathOr(r.path), frame, name, e.Type, t, ErrType)
	}
	want := int(n / int64(t.Size()))
	out := dst[:0]
	if cap(out) >= want {
		out = out[:want]
	} else {
		out = make([]T, want)
	}
	if err := r.readData(rawView(out), off, frame, name); err != nil {
		return nil, err
	}
	decodeLE(out, t)
	return out, nil
}
