package dhdf

import (
	"errors"
	"fmt"
	"hash/crc32"
)

// Verify opens the set whose main file is mhf with every check of [Open]
// and checks every chunk's CRC-32C, reading each chunk in pieces (so a
// huge chunk is never held in memory). It returns nil for an intact set,
// else the problems found, joined (each naming its file). It is what
// `ftigo dhdf verify` does.
func Verify(mhf string, opts Options) error {
	s, err := Open(mhf, opts)
	if err != nil {
		return err
	}
	defer s.Close()
	var errs []error
	for _, x := range s.SDSs() {
		for _, c := range x.Chunks {
			if err := s.verifyChunk(c); err != nil {
				errs = append(errs, fmt.Errorf("sds %s chunk %s: %w", x.Name, c.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// VerifyChunk checks one chunk's CRC-32C, reading it in pieces (never
// the whole chunk at once, so it works for chunks larger than
// Options.MaxRead). It is [Verify]'s check for one chunk, for a caller
// that reports chunk by chunk.
func (s *Set) VerifyChunk(c Chunk) error { return s.verifyChunk(c) }

// verifyChunk checks one chunk's CRC-32C, reading it in pieces of at most
// tableReadSize bytes.
func (s *Set) verifyChunk(c Chunk) error {
	m := s.mem[c.FileID]
	o, err := m.h.Lookup("/" + c.Name)
	if err != nil {
		return err
	}
	want, err := s.chunkCRC(m, o, c)
	if err != nil {
		return err
	}
	buf := make([]byte, min(o.DataSize, tableReadSize))
	crc := uint32(0)
	for off := uint64(0); off < o.DataSize; {
		b := buf[:min(uint64(len(buf)), o.DataSize-off)]
		if err := m.h.ReadDataAt(o, b, off); err != nil {
			return err
		}
		crc = crc32.Update(crc, castagnoli, b)
		off += uint64(len(b))
	}
	if crc != want {
		return &CorruptionError{Path: m.h.Path(), Offset: int64(o.DataAddr), Err: fmt.Errorf("%w: chunk %q: crc32c %08x, stored %08x", ErrChecksum, c.Name, crc, want)}
	}
	return nil
}
