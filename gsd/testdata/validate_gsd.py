#!/usr/bin/python3
"""Validate a .gsd file against python3-gsd 2.7 (C layer + pygsd) plus a strict check of every index entry."""
import struct, sys
import gsd.fl, gsd.pygsd

fn = sys.argv[1]
problems = []
b = open(fn, 'rb').read()
magic, iloc, ialloc, nloc, nalloc, sv, gv = struct.unpack_from('<QQQQQII', b, 0)
size = len(b)
if magic != 0x65DF65DF65DF65DF: problems.append('bad magic')
if not (0x00010000 <= gv < 0x00030000): problems.append(f'gsd_version {gv:#x} outside [1.0, 3.0)')
if ialloc == 0: problems.append('index_allocated_entries == 0 (reference writers loop forever when growing it)')
if nalloc == 0: problems.append('namelist_allocated_entries == 0 (gsd.fl refuses to open)')
if iloc + 32 * ialloc > size: problems.append('index block extends past EOF')
if nloc + 64 * nalloc > size: problems.append('namelist block extends past EOF')
for off, what in ((48, 'application'), (112, 'schema')):
    field = b[off:off + 64]
    text = field.split(b'\0')[0]
    if len(text) == 64: problems.append(f'{what} field has no NUL')
    elif any(field[len(text):]): problems.append(f'bytes after the {what} NUL are not zero (pygsd reads them)')
    try: text.decode('utf-8')
    except UnicodeDecodeError: problems.append(f'{what} is not valid UTF-8')
nl = b[nloc:nloc + 64 * nalloc]
if nl and nl[-1] != 0: problems.append('namelist block does not end with NUL')
names = []
if gv < 0x00020000:
    for k in range(nalloc):
        s = nl[64 * k:64 * (k + 1)]
        if s[:1] == b'\0': break
        names.append(s.split(b'\0')[0].decode())
else:
    p = 0
    while p < len(nl) and nl[p] != 0:
        e = nl.index(b'\0', p); raw = nl[p:e]; p = e + 1
        try: names.append(raw.decode('utf-8'))
        except UnicodeDecodeError:
            names.append(raw.decode('utf-8', 'replace')); problems.append(f'name {len(names) - 1} is not valid UTF-8')
    if any(nl[p:]): problems.append('bytes after the end of the name list are not zero (gsd.fl and pygsd read them as names)')
if len(set(names)) != len(names): problems.append('duplicate names in namelist')
sizes = {1: 1, 2: 2, 3: 4, 4: 8, 5: 1, 6: 2, 7: 4, 8: 8, 9: 4, 10: 8, 11: 1}
prev = None; used = 0
for k in range(ialloc):
    fr, N, loc, M, cid, typ, fl = struct.unpack_from('<QQqIHBB', b, iloc + 32 * k)
    if loc == 0:
        rest = b[iloc + 32 * k:iloc + 32 * ialloc]
        if any(struct.unpack_from('<q', rest, 32 * j + 16)[0] != 0 for j in range(len(rest) // 32)):
            problems.append(f'non-zero location after the terminator slot {k}')
        break
    used += 1
    where = f'entry {k} (frame {fr}, id {cid})'
    if typ not in sizes: problems.append(f'{where}: unknown type {typ}')
    elif typ == 11: problems.append(f'{where}: GSD_TYPE_CHARACTER - python3-gsd 2.7 reports such files as corrupt')
    if M == 0: problems.append(f'{where}: M == 0')
    if fl != 0: problems.append(f'{where}: flags != 0')
    if cid >= len(names): problems.append(f'{where}: id beyond namelist')
    if fr >= ialloc: problems.append(f'{where}: frame >= index_allocated_entries (gsd treats as corrupt)')
    if typ in sizes and loc + N * M * sizes[typ] > size: problems.append(f'{where}: data extends past EOF')
    if prev is not None:
        key = (fr, cid) if gv >= 0x00020000 else (fr,)   # v2: sorted by (frame, id); v1: frames non-decreasing
        if key < prev: problems.append(f'{where}: index not sorted by {"(frame, id)" if gv >= 0x00020000 else "frame"}')
        if gv >= 0x00020000 and key == prev: problems.append(f'{where}: duplicate (frame, id)')
    prev = (fr, cid) if gv >= 0x00020000 else (fr,)
print(f'[strict] size={size} gsd_version={gv >> 16}.{gv & 0xffff} index@{iloc} used {used}/{ialloc} '
      f'namelist@{nloc} {64 * nalloc}B names={len(names)} problems={len(problems)}')
for p in problems[:20]: print('[strict] PROBLEM:', p)

def dump(f, label):
    print(f'[{label}] gsd_version={f.gsd_version} application={f.application!r} schema={f.schema!r} '
          f'schema_version={f.schema_version} nframes={f.nframes}')
    nms = f.find_matching_chunk_names('')
    print(f'[{label}] chunk names ({len(nms)}): {nms}')
    for i in range(f.nframes):
        for n in nms:
            if f.chunk_exists(frame=i, name=n):
                d = f.read_chunk(frame=i, name=n)
                print(f'[{label}] frame {i} {n}: shape={d.shape} dtype={d.dtype} head={d.ravel()[:4].tolist()}')
ok = not problems
for label, opener in (('gsd.fl', lambda: gsd.fl.open(name=fn, mode='rb')),
                      ('pygsd', lambda: gsd.pygsd.GSDFile(open(fn, 'rb')))):
    try:
        with opener() as f:
            dump(f, label)
    except Exception as e:
        ok = False
        print(f'[{label}] FAILED: {type(e).__name__}: {e}')
print('VALID' if ok else 'INVALID')
sys.exit(0 if ok else 1)
