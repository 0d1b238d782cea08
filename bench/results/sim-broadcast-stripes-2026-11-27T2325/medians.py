import json,glob,statistics,sys,os,re
D=sys.argv[1]
rows={}
for f in sorted(glob.glob(D+'/*.json')):
    prof,mode,seed=re.match(r'(testbed|10gbit)-(.*?)-seed(\d+)(?:-n\d+)?\.json',os.path.basename(f)).groups()
    for r in json.load(open(f)):
        for x in r['results']:
            if x['system'] in ('ours','ours-failure'):
                rows.setdefault((prof,r['nodes'],mode),[]).append(x)
print("profile  N     shape            runs  median_s  min_s     max_s     /(S/B)  depth  max_upload/S  shard_queue_s  failure_free_s")
for (prof,n,mode) in sorted(rows, key=lambda k:(k[0]!='testbed',k[1],k[2])):
    xs=rows[(prof,n,mode)]
    t=[x['median_s'] for x in xs]
    e=xs[0]['extra']
    print(f"{prof:8} {n:<5} {('shard' if mode=='chain' else mode):16} {len(xs):<5} {statistics.median(t):.4f}    {min(t):.4f}    {max(t):.4f}    {statistics.median(t)/xs[0]['ideal_s']:.3f}   {statistics.median([x['extra']['depth'] for x in xs]):<6} {max(x['extra']['max_upload_bytes'] for x in xs)/xs[0]['size']:.3f}         {statistics.median([x['extra']['shard_queue_s'] for x in xs]):.4f}         {e.get('failure_free_s','')}")
