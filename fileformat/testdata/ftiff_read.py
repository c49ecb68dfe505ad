#!/usr/bin/python3
"""Independent FTI-FF v1/v2 reader written from docs/format/ftiff.md only.

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
    assert version in (1, 2) and (hsize, fbsize) == (64, 192)
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
    p += 32 * nbh
    assert p == len(mb) if version == 1 else p < len(mb)
    for vid, typ, name, esize, size in recs:
        dt = TYPES[typ] or f"V{esize}"
        arr = np.frombuffer(bytes(data[vid]), dtype=dt)
        print(f"var {vid} {name} type={typ} dtype={arr.dtype.str} count={arr.size} {arr.tobytes().hex()}")
    if version == 2:
        extension(mb[p:], {r[0]: r for r in recs})


def extension(ext, recs):
    """Prints the dataset and subset records of a version-2 extension area."""
    assert ext[-8:] == b"FTIFFEXT"
    nrec, size = struct.unpack_from("<I4xQ", ext, len(ext) - 24)
    assert size == len(ext)
    p = 0
    for _ in range(nrec):
        kind, ver, flags, length = struct.unpack_from("<HHIQ", ext, p)
        body = ext[p + 16:p + 16 + length]
        p += 16 + (length + 7) // 8 * 8
        if (kind, ver) == (1, 1):
            did, typ, rank, dflags, esize, nlen = struct.unpack_from("<iBBHII", body, 0)
            shape = list(struct.unpack_from(f"<{rank}q", body, 16))
            name = body[16 + 8 * rank:16 + 8 * rank + nlen].decode()
            print(f"dataset {did} {name} shape={shape} type={typ} esize={esize} sparse={dflags & 1}")
        elif (kind, ver) == (2, 1):
            vid, did, rank = struct.unpack_from("<iiB", body, 0)
            off = list(struct.unpack_from(f"<{rank}q", body, 16))
            cnt = list(struct.unpack_from(f"<{rank}q", body, 16 + 8 * rank))
            vid_, typ, name, esize, size = recs[vid]
            n = 1
            for c in cnt:
                n *= c
            assert n * esize == size, "subset size"
            print(f"subset var={vid} dataset={did} offset={off} count={cnt}")
        else:
            assert flags & 1 == 0, "unknown required record"
    assert p == len(ext) - 24


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print("file", arg.rsplit("/", 1)[-1])
        main(arg)
