#!/usr/bin/python3
"""Reference timings for ftigo's gsd benchmarks with python3-gsd (gsd.fl).

write PATH FRAMES N M DTYPE FSYNC: write FRAMES frames of one N×M chunk
    "data" (with fsync of the file after every end_frame when FSYNC is 1).
read PATH: read every frame's "data" chunk back.
Prints: seconds=<loop time> bytes=<data bytes> maxrss_kb=<peak RSS>."""
import os
import resource
import sys
import time

import gsd.fl
import numpy as np

mode, path = sys.argv[1], sys.argv[2]
if mode == 'write':
    frames, n, m = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    dtype, fsync = np.dtype(sys.argv[6]), sys.argv[7] == '1'
    data = np.arange(n * m, dtype=dtype).reshape(n, m)
    t0 = time.perf_counter()
    f = gsd.fl.open(name=path, mode='wb', application='bench', schema='bench', schema_version=[1, 0])
    fd = os.open(path, os.O_RDONLY)
    for i in range(frames):
        f.write_chunk(name='data', data=data)
        f.end_frame()
        if fsync:
            os.fsync(fd)
    f.close()
    os.close(fd)
    dt = time.perf_counter() - t0
    nbytes = frames * data.nbytes
else:
    t0 = time.perf_counter()
    nbytes = 0
    with gsd.fl.open(name=path, mode='rb') as f:
        for i in range(f.nframes):
            nbytes += f.read_chunk(frame=i, name='data').nbytes
    dt = time.perf_counter() - t0
print(f'seconds={dt} bytes={nbytes} maxrss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}')
