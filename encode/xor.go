package encode

import "crypto/subtle"

// XOR sets dst[i] ^= src[i] for i < len(src); len(dst) must be >= len(src).
// Parity contributions are summed with it (addition in GF(2^8) is XOR).
func XOR(dst, src []byte) {
	subtle.XORBytes(dst[:len(src)], dst[:len(src)], src)
}
