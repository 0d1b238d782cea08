#!/bin/bash
# prints: profile fanout N seed ours ideal
B=hoplite
for prof in testbed 10g; do
  extra=""; [ $prof = 10g ] && extra="--bandwidth 10gbit --latency 20us"
  for fo in 1 0; do
    for seed in 1 2 3 4 5; do
      $B sim --scenario broadcast --nodes 8,16,64,256,1024 --size 32MiB --seed $seed --fanout $fo $extra 2>&1 | grep '^RESULT' | sed -E "s/^RESULT .*nodes=([0-9]+) .*ours=([^ ]+) ideal=([^ ]+) .*/$prof $fo \1 $seed \2 \3/"
    done
  done
done
