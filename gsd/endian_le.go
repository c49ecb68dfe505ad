//go:build 386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm

package gsd

// encodeLE returns the little-endian bytes of data; on little-endian
// machines that is a view of its memory.
func encodeLE[T Numeric](data []T, _ Type) []byte { return rawView(data) }

// decodeLE converts values read as little-endian bytes to host order in
// place; nothing to do here.
func decodeLE[T Numeric](_ []T, _ Type) {}
