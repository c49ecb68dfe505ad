#!/usr/bin/python3
"""Print everything python3-gsd reads from a GSD file as JSON, once through
the C layer (gsd.fl) and once through the pure-Python reader (gsd.pygsd):
metadata, chunk names, and for every chunk of every frame its dtype, shape
and the hex of its bytes. ftigo's interop tests compare this with what the
Go reader returns. With --validate it first runs validate_gsd.py (next to
this script) in the same process and adds its verdict and report, which
saves a second interpreter start.  Usage: gsd_dump.py [--validate] FILE"""
import contextlib
import io
import json
import os
import runpy
import sys

import gsd.fl
import gsd.pygsd


def dump(f):
    names = f.find_matching_chunk_names('')
    out = {
        'version': list(f.gsd_version),
        'application': f.application,
        'schema': f.schema,
        'schema_version': list(f.schema_version),
        'nframes': f.nframes,
        'names': names,
        'chunks': [],
    }
    for i in range(f.nframes):
        for n in names:
            if f.chunk_exists(frame=i, name=n):
                d = f.read_chunk(frame=i, name=n)
                out['chunks'].append([i, n, str(d.dtype), list(d.shape), d.tobytes().hex()])
    return out


res = {}
args = sys.argv[1:]
if args[0] == '--validate':
    fn = args[1]
    report = io.StringIO()
    code = 0
    sys.argv = ['validate_gsd.py', fn]
    with contextlib.redirect_stdout(report):
        try:
            runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'validate_gsd.py'))
        except SystemExit as e:
            code = e.code
    res['valid'] = code == 0
    res['report'] = report.getvalue()
else:
    fn = args[0]
with gsd.fl.open(name=fn, mode='rb') as f:
    res['fl'] = dump(f)
with gsd.pygsd.GSDFile(open(fn, 'rb')) as f:
    res['pygsd'] = dump(f)
json.dump(res, sys.stdout)
