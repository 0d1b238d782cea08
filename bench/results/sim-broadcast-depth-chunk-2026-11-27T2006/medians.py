#!/usr/bin/env python3
"""Medians over seeds (min-max) of seeds1-5.txt, old and new side by side."""
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith('#') or not line.strip():
        continue
    b, prof, sc, n, seed, t, ideal = line.split()
    rows[(prof, sc, int(n), b)].append((float(t.rstrip('s')), float(ideal.rstrip('s'))))
print('# medians over seeds 1-5 (min-max), / ideal; profile | scenario | N | old | new | new/old')
for prof in ('testbed', '10g'):
    for sc in ('broadcast', 'allreduce'):
        for n in sorted({k[2] for k in rows if k[0] == prof and k[1] == sc}):
            out = []
            for b in ('old', 'new'):
                ts = [t for t, _ in rows[(prof, sc, n, b)]]
                ideal = rows[(prof, sc, n, b)][0][1]
                m = statistics.median(ts)
                out.append((m, f'{m:.4f}s ({min(ts):.4f}-{max(ts):.4f}) {m/ideal:.2f}x'))
            print(f'{prof} | {sc} | {n} | old: {out[0][1]} | new: {out[1][1]} | new/old {out[1][0]/out[0][0]:.3f}')
