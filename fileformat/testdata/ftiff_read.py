#!/usr/bin/python3
"""Independent FTI-FF v1 reader written from docs/format/ftiff.md only.

Prints the header, the file block and every variable (restored from its
fragments with numpy) so TestPythonReader can compare with the Go reader.
Hashes are not checked (Python's hashlib has no BLAKE3); the structure is.
"""
import struct
import sys

import numpy as np

TYPES = {0: "u1", 1: "i1", 2: "<i2", 3: "<i4", 4: "<i8", 5: "u1", 6: "<u2", 7: "<u4",
         8: "<u8", 9: "<f4", 10: "<f8", 11: "<c8", 12: "<c16", 13: None}


def main(path):
    b = open(path, "rb").read()
    assert b[:8] == b"\x89FTI-FF\n", "magic"
    version, hsize, fbsize = struct.unpack_from("<HHH", b, 8)
    assert (version, hsize, fbsize) == (1, 64, 192)
    ckpt, rank, level = struct.unpack_from("<qiB", b, 16)
    fb = b[len(b) - 192:]
    assert fb[:8] == b"FTIFF-FB"
    flags, bs, nvars, nblocks, nchunks = struct.unpack_from("<IIIII", fb, 12)
    ckpt_size, fs, maxfs, ptfs, ts, moff, msize, nbh = struct.unpack_from("<qqqqqqqQ", fb, 32)
    assert fs == len(b) and moff + msize == fs - 192
    print(f"ckpt={ckpt} rank={rank} level={level} ts={ts} bs={bs} fs={fs} maxfs={maxfs} ptfs={ptfs}")
    mb = b[moff:moff + msize]
    p = 0
    recs = []
    for _ in range(nvars):
        vid, typ, nlen, esize, size = struct.unpack_from("<iBxHI4xq", mb, p)
        name = mb[p + 24:p + 24 + nlen].decode()
        recs.append((vid, typ, name, esize, size))
        p += 24 + (nlen + 7) // 8 * 8
    data = {r[0]: bytearray(r[4]) for r in recs}
    for _ in range(nblocks):
        nc, dbsize = struct.unpack_from("<I4xq", mb, p)
        p += 16
        for _ in range(nc):
            vid, idx, cid, has, dptr, fptr, csize, cont = struct.unpack_from("<iIIB3xqqqq", mb, p)
            assert recs[idx][0] == vid and csize <= cont
            data[vid][dptr:dptr + csize] = b[fptr:fptr + csize]
            p += 88
    assert len(mb) - p == 32 * nbh
    for vid, typ, name, esize, size in recs:
        dt = TYPES[typ] or f"V{esize}"
        arr = np.frombuffer(bytes(data[vid]), dtype=dt)
        print(f"var {vid} {name} type={typ} dtype={arr.dtype.str} count={arr.size} {arr.tobytes().hex()}")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print("file", arg.rsplit("/", 1)[-1])
        main(arg)
