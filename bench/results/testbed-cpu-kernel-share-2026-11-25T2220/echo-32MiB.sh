#!/bin/bash
# The kernel's cost of moving 32 MiB over the testbed's links, with no
# runtime in the way: bench/peers/echo at SIZE = 32 MiB between two
# testbed hosts, five timed round trips (each sends and receives 32 MiB
# on both sides). Run from the repository's root, as root:
#   gcc -O2 -pthread -o /tmp/echo32 bench/peers/echo/echo.c
#   bench/testbed run --hosts 2 --prefix hpx --net 7 -- bench/results/testbed-cpu-kernel-share-2026-11-25T2220/echo-32MiB.sh
# The ping prints its timed round trips' CPU (cpu_s=), the server its
# whole run's (six round trips, the warm-up's included) when stopped.
set -e
IFS=, read -r _ h1 <<< "$HOPLITE_TESTBED_HOSTS"
$HOPLITE_TESTBED exec --prefix "$HOPLITE_TESTBED_PREFIX" 1 -- /tmp/echo32 serve 39124 33554432 > /tmp/echo-tb-serve.out &
sleep 0.5
now=$(date +%s%N)
$HOPLITE_TESTBED exec --prefix "$HOPLITE_TESTBED_PREFIX" 0 -- /tmp/echo32 ping "$h1" 39124 33554432 1 5 $((now + 3000000000)) 1600000000 | tail -3
$HOPLITE_TESTBED exec --prefix "$HOPLITE_TESTBED_PREFIX" 1 -- pkill -TERM -f "echo32 serve" || true
sleep 0.5
cat /tmp/echo-tb-serve.out
