# The least-squares line of a report's CPU per operation (every rep of
# ours) against the bytes its hosts received, (N-1)*S: python3 fit.py R.json...
import json,sys,statistics
def fit(path):
    d=json.load(open(path)); n=d['nodes']
    xs=[];ys=[]
    for r in d['results']:
        if r['system']!='ours': continue
        for c in r['cpu_s']:
            xs.append((n-1)*r['size']); ys.append(c)
    mx=statistics.mean(xs); my=statistics.mean(ys)
    b=sum((x-mx)*(y-my) for x,y in zip(xs,ys))/sum((x-mx)**2 for x in xs)
    a=my-b*mx
    # medians-based fit
    med={}
    for r in d['results']:
        if r['system']=='ours': med[(n-1)*r['size']]=r['cpu_median_s']
    return b*1e9, a*1e3, med
for p in sys.argv[1:]:
    b,a,med=fit(p)
    print(f"{p.split('/')[-1]}: slope {b:.3f} ns/B, intercept {a:.1f} ms; medians (ms):", ", ".join(f"{k/7/2**20:.0f}MiB {v*1e3:.1f}" for k,v in sorted(med.items())))
