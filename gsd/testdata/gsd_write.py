#!/usr/bin/python3
"""Write a GSD file with the reference library (gsd.fl) for ftigo's
interop tests: every numeric type, 1-D and 2-D chunks, chunks missing in
some frames, more than 32 names (namelist growth) and more than 128 frames
(index growth).  Usage: gsd_write.py FILE FRAMES"""
import sys

import gsd.fl
import numpy as np

fn, frames = sys.argv[1], int(sys.argv[2])
types = [np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16,
         np.int32, np.int64, np.float32, np.float64]
with gsd.fl.open(name=fn, mode='wb', application='gsd_write.py',
                 schema='interop', schema_version=[2, 5]) as f:
    for i in range(frames):
        for k, t in enumerate(types):
            if (i + k) % 3 == 0:
                continue
            a = (np.arange(6 * (k + 1)) * (i + 1) + k).astype(t)
            f.write_chunk(name='typed/%s' % np.dtype(t).name, data=a.reshape(-1, 3) if k % 2 else a)
        f.write_chunk(name='frame', data=np.array([i], dtype=np.uint64))
        if i < 40:
            f.write_chunk(name='names/%03d/' % i + 'x' * (i * 3), data=np.array([i, -i], dtype=np.int32))
        f.end_frame()
