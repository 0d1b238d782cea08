#!/bin/bash
# Seeds 1-5 of the broadcast and AllReduce of 32 MiB (N = 8-256; the
# broadcast also at 1,024), both link profiles, the build before the
# shard's chunk (OLD, 96836fd^) and with it (NEW, 70a2616), side by side.
# prints: build profile scenario N seed time ideal
OLD=${OLD:-hoplite-old} NEW=${NEW:-hoplite}
for prof in testbed 10g; do
  extra=""; [ $prof = 10g ] && extra="--bandwidth 10gbit --latency 20us"
  for seed in 1 2 3 4 5; do
    for b in old new; do
      bin=$OLD; [ $b = new ] && bin=$NEW
      for args in "--scenario broadcast,allreduce --nodes 8,16,64,256" "--scenario broadcast --nodes 1024"; do
        $bin sim $args --size 32MiB --seed $seed $extra 2>&1 | grep '^RESULT' |
          sed -E "s/^RESULT scenario=([a-z]+) nodes=([0-9]+) .*ours=([^ ]+) ideal=([^ ]+) .*/$b $prof \1 \2 $seed \3 \4/"
      done
    done
  done
done
