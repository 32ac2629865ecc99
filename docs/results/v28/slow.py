import json,glob,sys,time,os
d=sys.argv[1]; top=int(sys.argv[2]) if len(sys.argv)>2 else 4
off=time.clock_gettime_ns(time.CLOCK_REALTIME)-time.clock_gettime_ns(time.CLOCK_MONOTONIC)
ev=[]
for p in glob.glob(d+'/*.json'):
    txt=open(p).read().rstrip().rstrip(',')
    if not txt.endswith(']}'): txt=txt.rstrip(',\n')+']}'
    try: j=json.loads(txt)
    except Exception as e:
        lines=[l.rstrip(',') for l in open(p).read().splitlines()[1:] if l.startswith('{')]
        j={'traceEvents':[json.loads(l) for l in lines]}
    names={}
    for e in j['traceEvents']:
        if e.get('ph')=='M' and e['name']=='thread_name': names[(e['pid'],e['tid'])]=e['args']['name']
    for e in j['traceEvents']:
        if e.get('ph')=='M': continue
        e['_t']=names.get((e['pid'],e['tid']),str(e['tid']))
        ev.append(e)
hp=[tuple(map(int,l.split())) for l in open(glob.glob(d+'/tl/hp-layered-*.txt')[0])]
lat=sorted(range(len(hp)),key=lambda i:hp[i][1]-hp[i][0],reverse=True)
for i in lat[:top]:
    s,e=hp[i]; s_us=(s-off)/1e3; e_us=(e-off)/1e3
    print(f"== HP #{i} latency {(e-s)/1e6:.3f} ms")
    for x in sorted(ev,key=lambda x:x['ts']):
        if s_us-500<=x['ts']<=e_us+300:
            dur=x.get('dur')
            print(f"  {x['ts']-s_us:9.1f} {'' if dur is None else f'+{dur:8.1f}':>10} {x['pid']} {x['_t'][:14]:14} {x['cat']:10} {x['name'][:20]:20} {json.dumps(x.get('args',{}))[:110]}")
