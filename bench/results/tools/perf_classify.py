#!/usr/bin/env python3
"""Where the members' CPU goes, from a perf profile of a testbed run.

    perf record -e cpu-clock -F 1000 -g -a -o perf.data -- sleep 12   # during the run
    perf script -i perf.data > perf.txt
    perf_classify.py perf.txt COMM

COMM is the members' process name as perf shows it (the hoplite
binary's name, cut at 15 characters). Each sample of COMM is put in the
first group its stack matches, in the order below; the bench agent's
own work (its data generation and checks) is counted and left out of
the shares, which are of the rest.
"""
import collections,sys
comm=sys.argv[2]
cat=collections.Counter(); tot=0
def top(st):
    s=' '.join(st)
    if 'bench.' in s: return 'bench agent (data generation, checks)'
    if 'runtime.sysmon' in s: return 'Go runtime: sysmon thread'
    if 'entersyscallWakeSysmon' in s: return 'Go runtime: waking sysmon'
    if 'seedProvider' in s or 'exchangeSeeds' in s or 'lag.' in s or 'membersActor' in s: return 'membership (health polls, seeds, ticks)'
    if 'net/http' in s or 'echo.' in s: return 'HTTP servers and clients (health checks, the bench agent)'
    if 'grpc' in s or 'remote.' in s: return 'actor remote (gRPC)'
    for f in st:
        if 'exc_page_fault' in f: return 'page faults'
    for f in st:
        if 'madvise' in f: return 'madvise'
    for f in st:
        if 'handle_softirqs' in f or 'do_softirq' in f or 'net_rx_action' in f: return 'kernel: softirq (veth, tbf, TCP receive)'
    for f in st:
        if 'tcp_sendmsg' in f: return 'kernel: TCP send'
        if 'tcp_recvmsg' in f: return 'kernel: TCP receive'
    for f in st:
        if 'runtime.gcBgMarkWorker' in f or 'runtime.gcDrain' in f or 'runtime.gcAssist' in f or 'runtime.bgsweep' in f or 'runtime.markroot' in f: return 'Go runtime: GC'
    for f in st:
        if 'runtime.mallocgc' in f: return 'Go runtime: allocation'
    for f in st:
        if 'runtime.schedule' in f or 'runtime.findRunnable' in f or 'runtime.park_m' in f or 'runtime.netpoll' in f or 'runtime.mcall' in f or 'runtime.goready' in f or 'runtime.ready' in f or 'futex' in f or 'runtime.mstart' in f or 'runtime.stopm' in f or 'runtime.startm' in f:
            return 'Go runtime: scheduler, netpoller, thread wake-ups'
    for f in st:
        if 'finish_task_switch' in f or '__schedule' in f: return 'kernel: context switches'
    for f in st:
        if 'do_syscall_64' in f: return 'kernel: other system calls'
    leaf=st[0]
    if 'memmove' in leaf: return 'copies (memmove)'
    if 'crc32' in leaf or 'xxh' in leaf.lower(): return 'checksums'
    return 'other user code'
stack=[];cur=None
def flush(st):
    global tot
    tot+=1; cat[top(st)]+=1
for line in open(sys.argv[1]):
    line=line.rstrip('\n')
    if not line.strip():
        if cur==comm and stack: flush(stack)
        stack=[];cur=None;continue
    if not line.startswith((' ','\t')): cur=line.split()[0]; stack=[]; continue
    p=line.split(None,1)
    if len(p)==2: stack.append(p[1].rsplit(' (',1)[0].split('+0x')[0])
agent=cat['bench agent (data generation, checks)']
nb=tot-agent
print('samples',tot,'agent',agent)
for k,v in cat.most_common():
    if k.startswith('bench'): continue
    print(f'{100*v/nb:5.1f}% {k}')
