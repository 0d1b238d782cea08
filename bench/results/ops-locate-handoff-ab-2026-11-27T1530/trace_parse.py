import sys,re,collections
evs=[]
cur=None
mode=None
for line in open(sys.argv[1]):
    if line.startswith('M='):
        if cur: evs.append(cur)
        m=re.match(r'M=(-?\d+) P=(-?\d+) G=(-?\d+) (\w+) Time=(\d+)(.*)',line)
        if not m: cur=None; continue
        cur=dict(M=m[1],P=m[2],G=int(m[3]),kind=m[4],t=int(m[5]),rest=m[6],stack=[],tstack=[])
        mode=None
    elif line.startswith('Stack='): mode='stack'
    elif line.startswith('TransitionStack='): mode='tstack'
    elif line.startswith('\t') and cur is not None and mode and not line.startswith('\t\t'):
        cur[mode].append(line.strip().split(' @ ')[0])
if cur: evs.append(cur)
import pickle
pickle.dump(evs,open('evs.pkl','wb'))
print(len(evs))
