#!/bin/bash
# The A/B of ops-locate-handoff-ab: base is 8139ace, after is 8139ace with
# the shard's handoff (d598cb4's change), both built into $BIN; the builds
# alternate, base first, ten runs each (1-5, then the BenchmarkInlineGetVsPing
# pair, then 6-10).
cd "$OUT"
for i in 1 2 3 4 5 6 7 8 9 10; do
for b in base after; do
  echo "== $b rep $i $(date -u +%H:%M:%S) $(uptime)" >> ops-load.txt
  $BIN/hoplite-$b bench ops --size 1KiB --callers 1 --hoplite $BIN/hoplite-$b --json $OUT/ops-$b-$i.json > ops-$b-$i.txt 2>ops-$b-$i.err
  echo "rc $?" >> ops-load.txt
done
if [ $i = 5 ]; then
  for b in base after; do
    echo "== $b $(date -u +%H:%M:%S) $(uptime)" >> inline-get-vs-ping.txt
    $BIN/cluster-$b.test -test.run '^$' -test.bench InlineGetVsPing -test.benchtime 5000x -test.count 5 2>&1 | grep -v "level=" | grep "Benchmark" | sed "s/^/$b /" >> inline-get-vs-ping.txt
  done
fi
done
