package ckpt

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/fileformat"
	"github.com/ftigo/ftigo/internal/levels"
)

// Compression is how a protected variable is stored: a lossless codec
// for its dCP blocks and an optional lossy reduction of its values
// (docs/format/ftiff.md, version 3). The zero value stores the variable
// as it is, unless the run's [Config.Compression] ([basic] compression)
// names a codec.
type Compression struct {
	// Codec compresses each dCP block (a block that does not shrink is
	// stored raw). Block hashes stay those of the uncompressed bytes, so
	// differential checkpoints and verification see the data itself.
	Codec fileformat.Codec
	// Lossy reduces a float64 or float32 variable's precision before it
	// is stored (never a default). Recover then restores the reduced
	// values: [Runtime.StoredInfo] reports the mode and its error, and
	// Recover logs a warning naming the variable.
	Lossy fileformat.Lossy
	// set marks a Compression given explicitly (its zero Codec then means
	// no compression, whatever the run's default).
	set bool
}

// SetCompression sets how variable id is stored from the next checkpoint
// on (FTI's FTI_SetCompression in its compression branch): c.Codec for
// its blocks, c.Lossy for its values. id must be protected and c.Lossy
// must apply to its type ([fileformat.Lossy.Check]); a later Protect of
// the same id keeps the setting, Unprotect drops it. Local.
func (r *Runtime) SetCompression(id int, c Compression) error {
	if err := r.usable("SetCompression"); err != nil {
		return err
	}
	v, ok := r.vars[id]
	if !ok {
		return fmt.Errorf("%w: id %d", ErrNotProtected, id)
	}
	if err := r.checkCompression(v, c); err != nil {
		return err
	}
	c.set = true
	if r.comp == nil {
		r.comp = map[int]Compression{}
	}
	r.comp[id] = c
	return nil
}

// checkCompression checks that c applies to v.
func (r *Runtime) checkCompression(v *variable, c Compression) error {
	if c.Codec != fileformat.CodecNone && c.Codec != fileformat.CodecZstd {
		return fmt.Errorf("%w: id %d: compression %v", ErrBadType, v.id, c.Codec)
	}
	if err := c.Lossy.Check(v.typ); err != nil {
		return fmt.Errorf("%w: id %d (%s): %v", ErrBadType, v.id, v.goType, err)
	}
	return nil
}

// compression is the compression variable id is written with.
func (r *Runtime) compression(id int) Compression {
	if c, ok := r.comp[id]; ok && c.set {
		return c
	}
	return Compression{Codec: r.cfg.Compression}
}

// A ProtectOption configures [ProtectWith].
type ProtectOption func(*protectOptions)

type protectOptions struct {
	name string
	comp *Compression
}

// WithName names the variable (as Protect's name argument).
func WithName(name string) ProtectOption { return func(o *protectOptions) { o.name = name } }

// WithCompression stores the variable with c ([Runtime.SetCompression]).
func WithCompression(c Compression) ProtectOption {
	return func(o *protectOptions) { o.comp = &c }
}

// ProtectWith is [Protect] with options: a name ([WithName]) and how the
// variable is stored ([WithCompression]).
func ProtectWith[T any](r *Runtime, id int, p *[]T, opts ...ProtectOption) error {
	var o protectOptions
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	var names []string
	if o.name != "" {
		names = []string{o.name}
	}
	if err := Protect(r, id, p, names...); err != nil {
		return err
	}
	if o.comp != nil {
		if err := r.SetCompression(id, *o.comp); err != nil {
			r.Unprotect(id)
			return err
		}
	}
	return nil
}

// StoredInfo describes variable id as the checkpoint Recover reads
// stores it (FTI_GetStoredSize with more): its size once restored
// (Size), the bytes it takes in the file (Stored: compressed blocks at
// their compressed size), its codec, and for a lossy variable its mode
// and the largest error the mode introduced (Bound). On a redistributing
// restart it describes the copy of this rank's own old rank (q*N/M of
// N old ranks, for rank q of M). Local.
func (r *Runtime) StoredInfo(id int) (fileformat.VarInfo, error) {
	if err := r.usable("StoredInfo"); err != nil {
		return fileformat.VarInfo{}, err
	}
	if st := r.reshape; st != nil {
		// This rank knows what its own old rank (q*N/M) stored: the
		// plain source when one count divides the other.
		src := st.own
		for _, v := range st.ownMeta.Vars {
			if int(v.ID) == id {
				return v, nil
			}
		}
		return fileformat.VarInfo{}, fmt.Errorf("ckpt: %s: old rank %d: variable %d: %w", st.what, src, id, fileformat.ErrNoVar)
	}
	st, err := r.openStored()
	if err != nil {
		return fileformat.VarInfo{}, err
	}
	v, err := st.r.Var(int32(id))
	if err != nil {
		return fileformat.VarInfo{}, fmt.Errorf("ckpt: stored info of %d: %w", id, err)
	}
	return v, nil
}

// warnLossy logs, once per Recover, that variable info was restored at
// reduced precision, with its mode and error bound.
func (r *Runtime) warnLossy(info fileformat.VarInfo) {
	if info.Exact() {
		return
	}
	r.log.Warn(fmt.Sprintf("Variable %d restored with lossy compression (%v): values differ from the protected ones by up to %.3g (relative %.3g)",
		info.ID, info.Lossy, info.Bound.Abs, info.Bound.Rel),
		zap.Int32("var-id", info.ID), zap.Stringer("lossy", info.Lossy), zap.Float64("max-abs-error", info.Bound.Abs),
		zap.Float64("max-rel-error", info.Bound.Rel))
}

// compressing reports whether some variable of vars is stored
// compressed or at reduced precision.
func compressing(vars []fileformat.Var) bool {
	for _, v := range vars {
		if v.Codec != fileformat.CodecNone || v.Lossy.Mode != fileformat.Exact {
			return true
		}
	}
	return false
}

// fullStats are the data statistics of a full checkpoint whose file sum
// describes, with its logical and stored bytes when comp says some
// variable was compressed (the manifest's ratio).
func fullStats(sum fileformat.Summary, comp bool) levels.DataStats {
	d := levels.DataStats{Written: sum.DataSize, Protected: sum.DataSize}
	if comp {
		d.Logical, d.Stored = sum.Logical, sum.Stored
	}
	return d
}

// compressionNote is the info line's note on the ratio of m ("",
// or ", compressed 3.1x").
func compressionNote(m *levels.Manifest) string {
	if m.Compressed == nil {
		return ""
	}
	return fmt.Sprintf(", compressed %.1fx", m.Compressed.Ratio())
}
