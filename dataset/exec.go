package dataset

import (
	"fmt"

	"github.com/ftigo/ftigo/fileformat"
)

// Source supplies the stored bytes of the old ranks' variables. ReadVarAt
// fills dst with len(dst) bytes of variable varID of old rank rank,
// starting at byte off, and must verify what it returns (a checkpoint
// source checks every block against its hash).
type Source interface {
	ReadVarAt(rank int, varID int32, dst []byte, off int64) error
}

// Files is a [Source] over the old ranks' FTI-FF files: Files[r] is rank
// r's file, and every dCP block read is checked against its hash.
type Files []*fileformat.Reader

// ReadVarAt reads from rank's file with [fileformat.Reader.ReadVarAt].
func (f Files) ReadVarAt(rank int, varID int32, dst []byte, off int64) error {
	if rank < 0 || rank >= len(f) || f[rank] == nil {
		return fmt.Errorf("%w: no file for old rank %d", ErrInvalid, rank)
	}
	return f[rank].ReadVarAt(varID, dst, off)
}

// Execution tuning: a copy of at least directMin bytes is read straight
// into its destination; smaller ones from one old variable are read
// together through a scratch window of at most window bytes, as long as
// the gap between two of them stays below maxGap (beyond it, reading the
// gap costs more than a second read).
const (
	directMin = 256 << 10
	window    = 8 << 20
	maxGap    = 64 << 10
)

// Execute fills new rank dst's variables: bufs maps each of its variable
// ids to the variable's memory, exactly as large as its subset (the
// product of the counts times the element size; [ErrBuffer] otherwise).
// Ranges no old subset covers are zeroed first, then every copy of
// [Plan.Copies] is read from src. On error the buffers hold partial data.
func (p *Plan) Execute(dst int, src Source, bufs map[int32][]byte) error {
	for _, s := range p.new.Subsets(dst) {
		want := p.new.VarSize(s)
		b, ok := bufs[s.VarID]
		if !ok {
			return fmt.Errorf("%w: rank %d variable %d (dataset %d): no buffer", ErrBuffer, dst, s.VarID, s.Dataset)
		}
		if int64(len(b)) != want {
			return fmt.Errorf("%w: rank %d variable %d (dataset %d, count %v): %d bytes, want %d",
				ErrBuffer, dst, s.VarID, s.Dataset, s.Count, len(b), want)
		}
	}
	for _, f := range p.Fills(dst) {
		clear(bufs[f.DstVar][f.Off : f.Off+f.Len])
	}
	return Apply(p.Copies(dst), src, bufs)
}

// Apply runs copies sorted by (Src, SrcVar, SrcOff), as [Plan.Copies]
// returns them, reading from src into bufs (indexed by DstVar).
func Apply(cs []Copy, src Source, bufs map[int32][]byte) error {
	var scratch []byte
	for i := 0; i < len(cs); {
		c := cs[i]
		if c.Len >= directMin {
			if err := src.ReadVarAt(c.Src, c.SrcVar, bufs[c.DstVar][c.DstOff:c.DstOff+c.Len], c.SrcOff); err != nil {
				return fmt.Errorf("dataset: read old rank %d variable %d bytes [%d, %d): %w", c.Src, c.SrcVar, c.SrcOff, c.SrcOff+c.Len, err)
			}
			i++
			continue
		}
		start, end := c.SrcOff, c.SrcOff+c.Len
		j := i + 1
		for ; j < len(cs); j++ {
			n := cs[j]
			if n.Src != c.Src || n.SrcVar != c.SrcVar || n.Len >= directMin || n.SrcOff < end ||
				n.SrcOff-end > maxGap || n.SrcOff+n.Len-start > window {
				break
			}
			end = n.SrcOff + n.Len
		}
		if int64(cap(scratch)) < end-start {
			scratch = make([]byte, end-start)
		}
		buf := scratch[:end-start]
		if err := src.ReadVarAt(c.Src, c.SrcVar, buf, start); err != nil {
			return fmt.Errorf("dataset: read old rank %d variable %d bytes [%d, %d): %w", c.Src, c.SrcVar, start, end, err)
		}
		for _, x := range cs[i:j] {
			copy(bufs[x.DstVar][x.DstOff:x.DstOff+x.Len], buf[x.SrcOff-start:])
		}
		i = j
	}
	return nil
}
