#!/bin/bash
cd /tmp/x/ab2
for round in 1 2; do
for b in base after; do
  echo "== $b round $round $(date -u +%H:%M:%S) $(uptime)" >> gvp.log
  /tmp/x/cluster-$b.test -test.run '^$' -test.bench InlineGetVsPing -test.benchtime 5000x -test.count 5 2>&1 | grep -v "level=" | grep "Benchmark" | sed "s/^/$b /" >> gvp.log
done
done
for i in 1 2 3 4 5; do
for b in base after; do
  echo "== $b rep $i $(date -u +%H:%M:%S) $(uptime)" >> ops.log
  /tmp/x/hoplite-$b bench ops --size 1KiB --callers 1 --hoplite /tmp/x/hoplite-$b --json /tmp/x/ab2/ops-$b-$i.json > ops-$b-$i.txt 2>ops-$b-$i.err
  echo "rc $?" >> ops.log
done
done
echo DONE >> ops.log
