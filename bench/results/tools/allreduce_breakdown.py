#!/usr/bin/env python3
"""Where an AllReduce's time goes on the testbed: ours against the peers.

    allreduce_breakdown.py RUN.samples LOGDIR [--system ours] [--pace 47.8e6]

RUN.samples is what linksampler.go recorded during a `hoplite bench
allreduce --testbed --log-level debug --log-dir LOGDIR` run. A burst is a
stretch in which some host's uplink moves bytes, ended by 8 ms in which
none moves more than 20 KB per sample. Ours's AllReduces are taken whole, from
their coordinator's start to its reply ("reduce done" lines); the bursts
that overlap no operation of ours (reduce-bcast's included) and move at
least 8 MiB on an uplink are the peers' launches (their warm-ups and a
best peer's sweep among them). For each:

  burst  first byte on any uplink to the last one
  ramp   first byte to the moment every uplink had sent 64 KiB
  tail   the first uplink's end (its last 64 KiB) to the last one's
  util   bytes per uplink over the burst, as a fraction of --pace (what
         tc carries of the link, in the bytes the veth counts)

and for ours, from its debug logs: pre (the coordinator's start to the
first byte), post (the last byte to the coordinator's reply), when the
last member had its tasks, the chain roots' and the gathers' ends
("reduce position timeline" lines, from actors/storenode).
"""
import argparse, datetime, glob, json, statistics

ap = argparse.ArgumentParser()
ap.add_argument('samples')
ap.add_argument('logdir')
ap.add_argument('--system', default='ours')
ap.add_argument('--pace', type=float, default=47.8e6)
a = ap.parse_args()

rows = [[int(x) for x in l.split()] for l in open(a.samples) if len(l.split()) > 2]
n = (len(rows[0]) - 1) // 2
up = lambda r, i: r[1 + 2 * i]

bursts, cur, quiet = [], None, None
for p, q in zip(rows, rows[1:]):
    if max(up(q, i) - up(p, i) for i in range(n)) > 20000:
        cur = [p, q] if cur is None else [cur[0], q]
        quiet = None
    elif cur is not None:
        quiet = quiet or p[0]
        if q[0] - quiet > 8e6:
            bursts.append(cur)
            cur = quiet = None
if cur:
    bursts.append(cur)


def ts(s):
    whole, frac = s.rstrip('Z').split('.')
    t = datetime.datetime.strptime(whole, '%Y-%m-%dT%H:%M:%S').replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp()) * 10**9 + int(frac.ljust(9, '0')[:9])


def load_ops(pattern):
    ops = {}  # reduce id -> its start, end and positions
    for f in glob.glob(pattern):
        for l in open(f):
            if '"reduce' not in l:
                continue
            try:
                e = json.loads(l)
            except ValueError:
                continue
            op = ops.setdefault(e.get('reduce', ''), {'pos': []})
            if e['msg'] == 'reduce done':
                end = ts(e['time'])
                op['start'], op['end'] = end - int(e['elapsed']), end
            elif e['msg'] == 'reduce position timeline':
                r = e['received_ns']
                op['pos'].append((r, r + e['done_ns'], e['gather'], e['position']))
    return [o for o in ops.values() if 'start' in o]


ops = [o for o in load_ops(f'{a.logdir}/node-*-gen*-{a.system}.log') if o['pos']]
# Every system of ours (reduce-bcast too): a peer's burst overlaps none.
busy = [(o['start'], o['end']) for o in load_ops(f'{a.logdir}/node-*-gen*.log')]


def measure(t0, t1):
    """The uplinks over [t0, t1]: from the first sample in it in which one
    moved over 20 KB to the last."""
    rs = [r for r in rows if t0 <= r[0] <= t1]
    moving = [q[0] for p, q in zip(rs, rs[1:]) if max(up(q, i) - up(p, i) for i in range(n)) > 20000]
    t0, t1 = moving[0], moving[-1]
    rs = [r for r in rs if t0 <= r[0] <= t1]
    starts, stops, total = [], [], []
    for i in range(n):
        base, tot = up(rs[0], i), up(rs[-1], i) - up(rs[0], i)
        total.append(tot)
        starts.append(next((r[0] for r in rs if up(r, i) - base >= 65536), t1))
        stops.append(next((r[0] for r in rs if up(r, i) - base >= tot - 65536), t1))
    return dict(t0=t0, t1=t1, burst=(t1 - t0) / 1e6, ramp=(max(starts) - t0) / 1e6, tail=(max(stops) - min(stops)) / 1e6,
                util=sum(total) / n / ((t1 - t0) / 1e9) / a.pace, mib=max(total) / 2**20)


ours = []
for o in ops:
    m = measure(o['start'], o['end'])
    pos = o['pos']
    n_nodes = len({p[3] for p in pos if p[2]})
    chains = [p for p in pos if not p[2] and p[3] < n_nodes * n_nodes]
    gathers = [p for p in pos if p[2]]
    ms = lambda t: (t - o['start']) / 1e6
    m.update(total=(o['end'] - o['start']) / 1e6, pre=ms(m['t0']), post=(o['end'] - m['t1']) / 1e6,
             tasks=ms(max(p[0] for p in pos)), chains_done=ms(max(p[1] for p in chains)),
             gathers_first=ms(min(p[1] for p in gathers)), gathers_last=ms(max(p[1] for p in gathers)))
    ours.append(m)
peers = []
for b in bursts:
    if any(min(b[1][0], e) - max(b[0][0], s) > 0 for s, e in busy):
        continue
    m = measure(b[0][0], b[1][0])
    if m['mib'] >= 8:
        peers.append(m)

cols = ['total', 'pre', 'tasks', 'ramp', 'burst', 'util', 'tail', 'chains_done', 'gathers_first', 'gathers_last', 'post']
print(f'{a.system}: ms from its coordinator\'s start (ramp, burst and tail from its first byte; util a fraction)')
print('  ' + ' '.join(f'{c:>13}' for c in cols))
fmt = lambda c, v: f'{v:13.3f}' if c == 'util' else f'{v:13.1f}'
for m in sorted(ours, key=lambda m: m['t0']):
    print('  ' + ' '.join(fmt(c, m[c]) for c in cols))
if ours:
    print('  ' + ' '.join(fmt(c, statistics.median(m[c] for m in ours)) for c in cols) + '  median')
print(f'peers: {len(peers)} bursts (their warm-ups and sweeps included), medians:')
for c in ['burst', 'ramp', 'tail', 'util']:
    if peers:
        print(f'  {c:>6} {statistics.median(m[c] for m in peers):.3f}')
