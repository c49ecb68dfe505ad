#!/usr/bin/python3
"""Print everything python3-gsd reads from a GSD file as JSON, once through
the C layer (gsd.fl) and once through the pure-Python reader (gsd.pygsd):
metadata, chunk names, and for every chunk of every frame its dtype, shape
and the hex of its bytes. ftigo's interop tests compare this with what the
Go reader returns. With --validate it first runs validate_gsd.py (next to
this script) in the same process and adds its verdict and report, which
saves a second interpreter start.  Output: {FILE: {...}} for each FILE; a file python cannot open gets
"error".  Usage: gsd_dump.py [--validate] FILE..."""
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


def one(fn, validate):
    res = {}
    if validate:
        report = io.StringIO()
        code = 0
        sys.argv = ['validate_gsd.py', fn]
        with contextlib.redirect_stdout(report):
            try:
                runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'validate_gsd.py'))
            except SystemExit as e:
                code = e.code
            except Exception as e:
                print(f'validator failed: {type(e).__name__}: {e}')
                code = 1
        res['valid'] = code == 0
        res['report'] = report.getvalue()
    try:
        with gsd.fl.open(name=fn, mode='rb') as f:
            res['fl'] = dump(f)
        with gsd.pygsd.GSDFile(open(fn, 'rb')) as f:
            res['pygsd'] = dump(f)
    except Exception as e:
        res['error'] = f'{type(e).__name__}: {e}'
    return res


args = sys.argv[1:]
validate = args[:1] == ['--validate']
if validate:
    args = args[1:]
json.dump({fn: one(fn, validate) for fn in args}, sys.stdout)
