package h5

import "encoding/binary"

// Wire format: never change. Values from the HDF5 File Format
// Specification 3.0 (sections II.A, III.E, III.F, IV.A).
const (
	signature      = "\x89HDF\r\n\x1a\n"
	superblockSize = 48 // superblock v2 including its checksum
	undef          = ^uint64(0)

	msgNil       = 0x00
	msgDataspace = 0x01
	msgLinkInfo  = 0x02
	msgDatatype  = 0x03
	msgFill      = 0x05
	msgLink      = 0x06
	msgLayout    = 0x08
	msgGroupInfo = 0x0A
	msgAttribute = 0x0C

	msgFlagConstant = 0x01

	linkTypeHard     = 0
	linkTypeExternal = 64

	layoutContiguous = 1
	layoutVirtual    = 3

	gheapMinSize   = 4096 // libhdf5's smallest global heap collection
	gheapHdrSize   = 16
	gheapObjHdr    = 16
	selHyperslab   = 2
	selAll         = 3
	maxMessageSize = 0xffff
)

func le16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func le32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func le64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }

func align8(n int) int { return (n + 7) &^ 7 }

// encodeSuperblock returns the 48-byte superblock v2.
func encodeSuperblock(eof, root uint64) []byte {
	b := make([]byte, 0, superblockSize)
	b = append(b, signature...)
	b = append(b, 2, 8, 8, 0) // version 2, offsets 8, lengths 8, flags 0
	b = le64(b, 0)            // base address
	b = le64(b, undef)        // superblock extension
	b = le64(b, eof)
	b = le64(b, root)
	return le32(b, Lookup3(b, 0))
}

type message struct {
	typ   byte
	flags byte
	body  []byte
}

// encodeObjectHeader returns a version-2 object header holding msgs in one
// chunk, with no times and no gap.
func encodeObjectHeader(msgs []message) []byte {
	n := 0
	for _, m := range msgs {
		n += 4 + len(m.body)
	}
	b := make([]byte, 0, n+20)
	b = append(b, "OHDR"...)
	b = append(b, 2)
	switch {
	case n < 1<<8:
		b = append(b, 0, byte(n))
	case n < 1<<16:
		b = append(b, 1)
		b = le16(b, uint16(n))
	default:
		b = append(b, 2)
		b = le32(b, uint32(n))
	}
	for _, m := range msgs {
		b = append(b, m.typ)
		b = le16(b, uint16(len(m.body)))
		b = append(b, m.flags)
		b = append(b, m.body...)
	}
	return le32(b, Lookup3(b, 0))
}

// encodeDataspace returns a dataspace message v2 body; nil dims is scalar.
func encodeDataspace(dims []uint64) []byte {
	typ := byte(1)
	if len(dims) == 0 {
		typ = 0
	}
	b := []byte{2, byte(len(dims)), 0, typ}
	for _, d := range dims {
		b = le64(b, d)
	}
	return b
}

// encodeSelection appends a dataspace selection: ALL when count is nil,
// otherwise one hyperslab block (version 1, 32-bit coordinates).
func encodeSelection(b []byte, start, count []uint64) []byte {
	if count == nil {
		b = le32(b, selAll)
		b = le32(b, 1)
		return le64(b, 0)
	}
	rank := len(count)
	b = le32(b, selHyperslab)
	b = le32(b, 1)
	b = le32(b, 0)
	b = le32(b, uint32(8+8*rank))
	b = le32(b, uint32(rank))
	b = le32(b, 1)
	for _, s := range start {
		b = le32(b, uint32(s))
	}
	for i, c := range count {
		b = le32(b, uint32(start[i]+c-1))
	}
	return b
}
