package main

import "unsafe"

// unsafeBytes views v's memory as bytes without copying; the view aliases v.
func unsafeBytes(v []float64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), len(v)*8)
}
