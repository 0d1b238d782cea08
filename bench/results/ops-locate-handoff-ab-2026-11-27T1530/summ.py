# medians over the runs (least-greatest); base | after; _us in microseconds
# usage: python3 summ.py (in this directory)
import json,glob,statistics,re
rows={}
for b in ('base','after'):
  for i in range(1,11):
    for line in open(f'ops-{b}-{i}.txt'):
      if not line.startswith('RESULT'): continue
      kv=dict(x.split('=',1) for x in line.split()[2:])
      key=(kv['mode'],kv['op'])
      rows.setdefault((b,)+key,[]).append(kv)
def med(v): v=sorted(v); return v[len(v)//2], v[0], v[-1]
for mode in ('in-process','processes'):
  for op in ('ping','put','get-after-put','get','delete'):
    for f,sc in (('p50_ns',1e3),('cpu_per_op_ns',1e3),('p50_over_ping',1)):
      if op=='ping' and f=='p50_over_ping': continue
      out=[]
      for b in ('base','after'):
        v=[float(kv[f])/sc for kv in rows[(b,mode,op)]]
        m,lo,hi=med(v); out.append('%7.2f (%.2f-%.2f)'%(m,lo,hi))
      print('%-10s %-14s %-14s'%(mode,op,f.replace('_ns','_us')), ' | '.join(out))
