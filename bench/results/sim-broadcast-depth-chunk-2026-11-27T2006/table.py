#!/usr/bin/env python3
"""The scale table's rows (time / ideal; notice and barrier in ms) from a
hoplite sim run's RESULT lines."""
import re, sys, collections
rows = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    if not line.startswith('RESULT '):
        continue
    f = dict(kv.split('=', 1) for kv in line.split()[1:] if '=' in kv)
    sec = lambda s: float(re.sub('s$', '', s))
    n, sc = int(f['nodes']), f['scenario']
    if sc in ('notice', 'barrier'):
        rows[sc][n] = '%.3g' % (sec(f['ours']) * 1e3)
    else:
        rows[sc][n] = '%.2f' % (sec(f['ours']) / sec(f['ideal']))
ns = sorted({n for r in rows.values() for n in r})
print('| N | ' + ' | '.join(map(str, ns)) + ' |')
for sc, r in rows.items():
    print(f'| {sc} | ' + ' | '.join(r.get(n, '') for n in ns) + ' |')
