#!/bin/bash
# usage: ssbytes.sh PIDFILE SECONDS -> bytes sent per member per second, by local port class
pids=$(cat $1); secs=$2
snap() { ss -tinpH 2>/dev/null | awk -v pids=" $(echo $pids) " '
  /users:/ { match($0, /pid=[0-9]+/); p=substr($0, RSTART+4, RLENGTH-4); keep = index(pids, " " p " ") > 0; split($4, a, ":"); lport=a[2]; split($5,b,":"); rport=b[2]; next_is=1; next }
  next_is==1 { next_is=0; if (keep && match($0, /bytes_sent:[0-9]+/)) { v=substr($0, RSTART+11, RLENGTH-11); print lport, rport, v } }'; }
snap > /tmp/x/ss0; sleep $secs; snap > /tmp/x/ss1
n=$(echo $pids | wc -w)
awk -v n=$n -v s=$secs 'NR==FNR { a[$1" "$2]=$3; next } { k=$1" "$2; d=$3-(k in a ? a[k] : 0); if (d<0) d=$3;
  c = ($1>=22000 && $1<23000) || ($2>=22000 && $2<23000) ? "health" : (($1>=21000 && $1<22000) || ($2>=21000 && $2<22000) ? "remote" : "other"); t[c]+=d; tot+=d }
  END { for (c in t) printf "%s %.0f B/s/member\n", c, t[c]/n/s; printf "total %.0f B/s/member\n", tot/n/s }' /tmp/x/ss0 /tmp/x/ss1
