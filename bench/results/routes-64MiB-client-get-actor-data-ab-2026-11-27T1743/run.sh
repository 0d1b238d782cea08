#!/bin/bash
# usage: ab2.sh TAG N A B -- alternates binaries hoplite-A and hoplite-B
tag=$1; n=$2; a=$3; b=$4
for i in $(seq 1 $n); do
  for x in $a $b; do
    uptime > /tmp/x/routes/$tag-$x-$i.uptime
    /tmp/x/routes/hoplite-$x bench routes --size 64MiB --reps 11 --json /tmp/x/routes/$tag-$x-$i.json > /tmp/x/routes/$tag-$x-$i.txt 2>/tmp/x/routes/$tag-$x-$i.err
    uptime >> /tmp/x/routes/$tag-$x-$i.uptime
  done
done
echo done > /tmp/x/routes/$tag.done
