#!/bin/bash
# usage: idle64.sh BIN N WAIT -> per class: sockets, segs/s/member, bytes/s/member
bin=$1; N=$2; wait=$3
d=/tmp/x/idlerun; rm -rf $d; mkdir -p $d
seeds=""; for i in $(seq 0 $((N-1))); do seeds="$seeds,127.0.0.1:$((22000+i))"; done; seeds=${seeds#,}
for i in $(seq 0 $((N-1))); do nohup $bin node --bind 127.0.0.1:$((21000+i)) --seeds $seeds --capacity 16MiB --warm-memory 0 > $d/log$i 2>&1 & echo $! >> $d/pids; done
sleep $wait
pids=$(cat $d/pids)
snap() { ss -tinpH 2>/dev/null | awk -v pids=" $(echo $pids) " '
  /users:/ { match($0, /pid=[0-9]+/); p=substr($0, RSTART+4, RLENGTH-4); keep = index(pids, " " p " ") > 0; split($4, a, ":"); lport=a[2]; split($5,b,":"); rport=b[2]; next_is=1; next }
  next_is==1 { next_is=0; if (keep) { s=0; b2=0; if (match($0, /segs_out:[0-9]+/)) s=substr($0, RSTART+9, RLENGTH-9); if (match($0, /bytes_sent:[0-9]+/)) b2=substr($0, RSTART+11, RLENGTH-11); print lport, rport, s, b2 } }'; }
snap > $d/s0; sleep 30; snap > $d/s1
awk -v n=$N -v s=30 'NR==FNR { a[$1" "$2]=$3; bb[$1" "$2]=$4; next } { k=$1" "$2; d=$3-(k in a ? a[k] : 0); e=$4-(k in bb ? bb[k] : 0); if (d<0) d=$3;
  c = ($1>=22000 && $1<23000) || ($2>=22000 && $2<23000) ? "health" : (($1>=21000 && $1<22000) || ($2>=21000 && $2<22000) ? "remote" : "data"); t[c]+=d; by[c]+=e; conns[c]++; T+=d; B+=e }
  END { for (c in t) printf "%-7s sockets/member %5.1f segs/s/member %6.2f payload B/s/member %7.0f\n", c, conns[c]/n, t[c]/n/s, by[c]/n/s; printf "total   segs/s/member %6.2f payload B/s/member %7.0f  link est B/s/member %7.0f\n", T/n/s, B/n/s, (B+66*T)/n/s }' $d/s0 $d/s1
grep -l "level=error\|panic" $d/log* | head -3
kill $(cat $d/pids) 2>/dev/null; sleep 2
