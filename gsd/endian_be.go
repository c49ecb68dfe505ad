//go:build !(386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package gsd

import "slices"

// encodeLE returns the little-endian bytes of data (a swapped copy on
// big-endian machines).
func encodeLE[T Numeric](data []T, t Type) []byte {
	b := slices.Clone(rawView(data))
	swap(b, t.Size())
	return b
}

// decodeLE converts values read as little-endian bytes to host order in place.
func decodeLE[T Numeric](data []T, t Type) { swap(rawView(data), t.Size()) }

func swap(b []byte, w int) {
	for i := 0; i+w <= len(b); i += w {
		slices.Reverse(b[i : i+w])
	}
}
