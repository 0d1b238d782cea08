#!/bin/bash
# Idle bytes per member on loopback, old vs new, alternating.
out=/tmp/x/idle-ab.txt; : > $out
for rep in 1 2 3 4 5; do
 for N in 8 24 64; do
  for bin in old new; do
   d=/tmp/x/idlerun; rm -rf $d; mkdir -p $d
   seeds=""; for i in $(seq 0 $((N-1))); do seeds="$seeds,127.0.0.1:$((21000+i+1000))"; done; seeds=${seeds#,}
   for i in $(seq 0 $((N-1))); do nohup /tmp/hop-$bin node --bind 127.0.0.1:$((21000+i)) --seeds $seeds --capacity 16MiB > $d/log$i 2>&1 & echo $! >> $d/pids; done
   sleep 60
   load=$(cut -d' ' -f1 /proc/loadavg)
   res=$(/tmp/x/ssbytes.sh $d/pids 20 | tr '\n' ' ')
   echo "rep=$rep N=$N bin=$bin load=$load $res" >> $out
   kill $(cat $d/pids); sleep 3
  done
 done
done
echo done >> $out
