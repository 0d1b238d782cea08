#!/bin/bash
# Reproduces the runs here: ./run.sh DIR HOPLITE (a built cmd/hoplite).
# Seeds 1-5; the shard's choice (no --stripes) beside 2 and 3 stripes, on
# the testbed's links (N = 8, 64, 256, 1,024; 128 and 512 by
# the second loop) and on 10 Gbit/s links of 20 us; 2 stripes with 3
# hosts killed at half the failure-free time at 1,024.
D=$1; B=$2
for seed in 1 2 3 4 5; do
  for prof in testbed 10gbit; do
    if [ $prof = testbed ]; then P=""; NS=8,64,256,1024; else P="--bandwidth 10gbit --latency 20us"; NS=64,1024; fi
    for mode in chain stripes2 stripes3; do
      case $mode in chain) M="";; stripes2) M="--stripes 2";; stripes3) M="--stripes 3";; esac
      $B sim --scenario broadcast --nodes $NS --size 32MiB --seed $seed $P $M --json $D/$prof-$mode-seed$seed.json > $D/$prof-$mode-seed$seed.txt 2>&1
    done
  done
  $B sim --scenario broadcast --nodes 1024 --size 32MiB --seed $seed --stripes 2 --kill 3 --json $D/testbed-stripes2-kill3-seed$seed.json > $D/testbed-stripes2-kill3-seed$seed.txt 2>&1
  uptime >> $D/uptime-runs.txt
done
for seed in 1 2 3 4 5; do
  $B sim --scenario broadcast --nodes 128,512 --size 32MiB --seed $seed --json $D/testbed-chain-seed$seed-n512.json > $D/testbed-chain-seed$seed-n512.txt 2>&1
  $B sim --scenario broadcast --nodes 128,512 --size 32MiB --seed $seed --stripes 2 --json $D/testbed-stripes2-seed$seed-n512.json > $D/testbed-stripes2-seed$seed-n512.txt 2>&1
  uptime >> $D/uptime-runs.txt
done
python3 $(dirname $0)/medians.py $D > $D/medians.txt
