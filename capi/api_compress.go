package main

import (
	"fmt"

	"go.uber.org/zap"

	"github.com/ftigo/ftigo/ckpt"
	"github.com/ftigo/ftigo/fileformat"
)

// FTI's compression modes (FTIT_CPC_MODE in its compression branch), and
// FTI_CPC_ZSTD, ftigo's lossless mode. The values are fti.h's.
const (
	cpcNone  = 0  // FTI_CPC_NONE: stored as it is
	cpcFpzip = 1  // FTI_CPC_FPZIP: not offered
	cpcZfp   = 2  // FTI_CPC_ZFP: not offered
	cpcFloat = 3  // FTI_CPC_SINGLE: double stored as float
	cpcHalf  = 4  // FTI_CPC_HALF: double or float stored as half
	cpcStrip = 5  // FTI_CPC_STRIP: mantissa cut to parameter bits
	cpcZstd  = 16 // FTI_CPC_ZSTD: lossless, ftigo's extension
)

// FTI's compression parameter types (FTIT_CPC_TYPE).
const (
	cpcTypeNone      = 0 // FTI_CPC_TYPE_NONE
	cpcTypeAccuracy  = 1 // FTI_CPC_ACCURACY: not offered
	cpcTypePrecision = 2 // FTI_CPC_PRECISION: parameter counts bits
)

// compressionOf maps FTI_SetCompression's arguments to ckpt's setting. A
// lossy mode keeps the run's lossless codec ([basic] compression).
func compressionOf(mode, parameter, typ int, codec fileformat.Codec) (ckpt.Compression, error) {
	if typ != cpcTypeNone && typ != cpcTypePrecision {
		return ckpt.Compression{}, fmt.Errorf("compression type %d is not offered (FTI_CPC_TYPE_NONE or FTI_CPC_PRECISION)", typ)
	}
	switch mode {
	case cpcNone:
		return ckpt.Compression{}, nil
	case cpcZstd:
		return ckpt.Compression{Codec: fileformat.CodecZstd}, nil
	case cpcFloat:
		return ckpt.Compression{Codec: codec, Lossy: fileformat.Lossy{Mode: fileformat.ToFloat32}}, nil
	case cpcHalf:
		return ckpt.Compression{Codec: codec, Lossy: fileformat.Lossy{Mode: fileformat.ToFloat16}}, nil
	case cpcStrip:
		if parameter < 0 || parameter > 52 {
			return ckpt.Compression{}, fmt.Errorf("FTI_CPC_STRIP keeps 0 to 52 mantissa bits, not %d", parameter)
		}
		return ckpt.Compression{Codec: codec, Lossy: fileformat.Lossy{Mode: fileformat.Mantissa, Bits: uint8(parameter)}}, nil
	case cpcFpzip, cpcZfp:
		return ckpt.Compression{}, fmt.Errorf("compression mode %d (fpzip, zfp) is not offered: use FTI_CPC_ZSTD, FTI_CPC_SINGLE, FTI_CPC_HALF or FTI_CPC_STRIP", mode)
	}
	return ckpt.Compression{}, fmt.Errorf("unknown compression mode %d", mode)
}

// setCompression is FTI_SetCompression(id, mode, parameter, type) from
// FTI's compression branch: how a protected variable is stored from the
// next checkpoint on. Local.
func (l *library) setCompression(id, mode, parameter, typ int) int {
	const fn = "FTI_SetCompression"
	if !l.ready(fn) {
		return codeFailure
	}
	if _, ok := l.vars[id]; !ok {
		return l.fail(fn, fmt.Sprintf("variable %d is not protected", id))
	}
	c, err := compressionOf(mode, parameter, typ, l.cfg.Compression)
	if err != nil {
		return l.fail(fn, fmt.Sprintf("variable %d: %v", id, err))
	}
	if err := l.rt.SetCompression(id, c); err != nil {
		return l.fail(fn, fmt.Sprintf("variable %d", id), zap.Error(err))
	}
	return codeSuccess
}
