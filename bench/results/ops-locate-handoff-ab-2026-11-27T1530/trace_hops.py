import pickle,re,collections,sys,statistics
evs=pickle.load(open(sys.argv[1],'rb'))
for e in evs:
    m=re.search(r'GoID=(\d+) (\w+->\w+) Reason="([^"]*)"',e['rest'])
    if m: e['go']=int(m[1]); e['tr']=m[2]; e['why']=m[3]
    else: e['go']=None
C=int(sys.argv[2])
seq=[e for e in evs if e['go']==C or (e['G']==C and e['go'] is not None)]
nloc=sum(1 for e in seq if e['go']==C and e['tr']=='Running->Waiting' and e['why']=='select')
nnet=sum(1 for e in seq if e['go']==C and e['tr']=='Running->Waiting' and e['why']=='network')
print('locates',nloc,'network waits',nnet)
# segments
segs=collections.defaultdict(list)
state=None; last=None
for e in seq:
    if e['go']==C and e['tr']=='Waiting->Runnable' and e['why']=='' and state in ('net',None): tw=e['t']; state='woke'
    elif e['go']==C and e['tr']=='Runnable->Running':
        if state=='woke': segs['net wake -> running'].append(e['t']-tw); tr=e['t']; state='run1'
        elif state=='replied': segs['reply -> ctl running'].append(e['t']-td); tr2=e['t']; state='run2'
    elif e['go']!=C and e['G']==C and 'Waiting->Runnable'==e['tr'] and state in ('run1','run2'):
        segs['running -> post to shard'].append(e['t']-(tr if state=='run1' else tr2)); tp=e['t']; worker=e['go']; state='posted'
    elif e['go']==C and e['tr']=='Running->Waiting' and e['why']=='select' and state=='posted':
        segs['post -> ctl parks'].append(e['t']-tp); state='parked'
    elif e['go']==C and e['tr']=='Waiting->Runnable' and state=='parked':
        segs['post -> shard delivers'].append(e['t']-tp); td=e['t']; state='replied'
    elif e['go']==C and e['tr']=='Running->Waiting' and e['why']=='network' and state=='run2':
        segs['ctl running -> reads again'].append(e['t']-tr2); state='net'
for k,v in segs.items():
    v=sorted(v); print('%-30s n=%5d p25 %6.1f p50 %6.1f p75 %6.1f µs'%(k,len(v),v[len(v)//4]/1e3,v[len(v)//2]/1e3,v[3*len(v)//4]/1e3))
walls=[];gaps=[]
tw=None; n=0; lastnet=None
for e in seq:
    if e['go']==C and e['tr']=='Waiting->Runnable' and e['why']=='' and tw is None and n==0:
        tw=e['t']
        if lastnet: gaps.append(e['t']-lastnet)
    elif e['go']==C and e['tr']=='Running->Waiting' and e['why']=='select': n+=1
    elif e['go']==C and e['tr']=='Running->Waiting' and e['why']=='network':
        if tw is not None and n==1: walls.append(e['t']-tw)
        tw=None; n=0; lastnet=e['t']
walls.sort(); gaps.sort()
print('server wall per lone Locate: n',len(walls),'p25 %.1f p50 %.1f p75 %.1f'%(walls[len(walls)//4]/1e3,walls[len(walls)//2]/1e3,walls[3*len(walls)//4]/1e3))
print('idle gap between: p25 %.1f p50 %.1f p75 %.1f'%(gaps[len(gaps)//4]/1e3,gaps[len(gaps)//2]/1e3,gaps[3*len(gaps)//4]/1e3))
