#!/usr/bin/python3
"""Everything h5py sees of a distributed HDF set, and which single-bit
changes alter it.

Usage: h5py_flips.py DIR MHF FLIPS.json

DIR holds the set's files, MHF is its main file's name. The script dumps
what h5py reads of every file of the set (every group, link, attribute
with its dtype, shape and raw bytes, every dataset with its dtype, shape,
layout, fill value, virtual sources and raw bytes, read directly and, for
the main file, through its virtual datasets and external links) as the
baseline. FLIPS.json is a list of [file, offset, mask]: for each, the set
is copied to a fresh directory with that byte XORed with mask, dumped
again, and compared. It prints JSON: {"baseline": DUMP, "changed": [[file,
offset, mask, first difference], ...]}. An error while reading is part of
the dump (so a file h5py cannot read counts as changed).
"""
import hashlib
import json
import os
import shutil
import sys
import tempfile

import h5py
import numpy as np


def raw(a):
    a = np.asarray(a)
    return {'dtype': str(a.dtype), 'descr': repr(a.dtype.descr), 'shape': list(a.shape),
            'sha1': hashlib.sha1(a.tobytes()).hexdigest()}


def attrs(obj):
    out = {}
    for k in sorted(obj.attrs.keys()):
        try:
            out[k] = raw(obj.attrs[k])
        except Exception as e:
            out[k] = 'error: ' + type(e).__name__
    return out


def dataset(d):
    out = {'kind': 'dataset', 'dtype': str(d.dtype), 'descr': repr(d.dtype.descr), 'shape': list(d.shape),
           'maxshape': list(d.maxshape) if d.maxshape is not None else None, 'chunks': d.chunks,
           'compression': d.compression, 'virtual': d.is_virtual, 'attrs': attrs(d)}
    try:
        out['fill'] = raw(d.fillvalue)
    except Exception as e:
        out['fill'] = 'error: ' + type(e).__name__
    if d.is_virtual:
        out['sources'] = [[m.vspace.get_select_bounds()[0], m.vspace.get_select_bounds()[1], m.file_name,
                           m.dset_name] for m in d.virtual_sources()]
        out['sources'] = [[list(map(int, a)), list(map(int, b)), f, n] for a, b, f, n in out['sources']]
    try:
        out['data'] = raw(d[...])
    except Exception as e:
        out['data'] = 'error: ' + type(e).__name__
    return out


def group(g, depth=0):
    out = {'kind': 'group', 'attrs': attrs(g), 'members': {}}
    for k in sorted(g.keys()):
        try:
            link = g.get(k, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                m = {'kind': 'external', 'file': link.filename, 'path': link.path}
                try:
                    m['target'] = dataset(g[k]) if isinstance(g[k], h5py.Dataset) else 'group'
                except Exception as e:
                    m['target'] = 'error: ' + type(e).__name__
            else:
                o = g[k]
                m = dataset(o) if isinstance(o, h5py.Dataset) else group(o, depth + 1)
        except Exception as e:
            m = 'error: ' + type(e).__name__
        out['members'][k] = m
    return out


def dump(d, files):
    out = {}
    for name in files:
        try:
            with h5py.File(os.path.join(d, name), 'r') as f:
                out[name] = {'userblock': f.userblock_size, 'root': group(f)}
        except Exception as e:
            out[name] = 'error: ' + type(e).__name__
    return out


def first_diff(a, b, path=''):
    if type(a) is not type(b):
        return f'{path}: {str(a)[:80]} -> {str(b)[:80]}'
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f'{path}/{k}: missing on one side'
            d = first_diff(a[k], b[k], path + '/' + str(k))
            if d:
                return d
        return ''
    if isinstance(a, list):
        if len(a) != len(b):
            return f'{path}: length {len(a)} -> {len(b)}'
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, f'{path}[{i}]')
            if d:
                return d
        return ''
    return '' if a == b else f'{path}: {str(a)[:80]} -> {str(b)[:80]}'


def main():
    src, mhf, flips_json = sys.argv[1:4]
    files = sorted(n for n in os.listdir(src) if n.endswith('.h5'))
    files.remove(mhf)
    files.insert(0, mhf)
    base = dump(src, files)
    with open(flips_json) as fh:
        flips = json.load(fh)
    contents = {n: open(os.path.join(src, n), 'rb').read() for n in files}
    changed = []
    work = tempfile.mkdtemp(prefix='h5flip-')
    try:
        for i, (name, off, mask) in enumerate(flips):
            d = os.path.join(work, str(i))
            os.mkdir(d)
            for n, b in contents.items():
                if n == name:
                    b = bytearray(b)
                    b[off] ^= mask
                with open(os.path.join(d, n), 'wb') as fh:
                    fh.write(b)
            got = dump(d, files)
            diff = first_diff(base, got)
            if diff:
                changed.append([name, off, mask, diff])
            shutil.rmtree(d)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    json.dump({'baseline': base, 'changed': changed}, sys.stdout)


main()
