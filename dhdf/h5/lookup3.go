package h5

import "math/bits"

// Lookup3 returns Bob Jenkins' lookup3 "hashlittle" of p with the given
// initial value, the checksum HDF5 puts on its metadata (initval 0).
func Lookup3(p []byte, initval uint32) uint32 {
	a := 0xdeadbeef + uint32(len(p)) + initval
	b, c := a, a
	le := func(q []byte) uint32 {
		var v uint32
		for i := len(q) - 1; i >= 0; i-- {
			v = v<<8 | uint32(q[i])
		}
		return v
	}
	for len(p) > 12 {
		a += le(p[0:4])
		b += le(p[4:8])
		c += le(p[8:12])
		// mix
		a -= c
		a ^= bits.RotateLeft32(c, 4)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 6)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 8)
		b += a
		a -= c
		a ^= bits.RotateLeft32(c, 16)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 19)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 4)
		b += a
		p = p[12:]
	}
	if len(p) == 0 {
		return c
	}
	var tail [12]byte
	copy(tail[:], p)
	a += le(tail[0:4])
	b += le(tail[4:8])
	c += le(tail[8:12])
	// final
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}
