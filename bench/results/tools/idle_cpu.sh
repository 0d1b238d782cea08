#!/bin/bash
# What an idle cluster costs: the CPU that N `hoplite node` processes on
# loopback (GOMAXPROCS 1 each, as the testbed runs them) spend over a
# window in which nobody uses them, for one or more hoplite binaries,
# their repetitions interleaved (A B A B ...) so that the machine's other
# work falls on all of them alike.
#
#   idle_cpu.sh [-n NODES] [-reps R] [-secs S] [-settle S] BINARY...
#
# Each repetition starts a new cluster, waits -settle seconds (default 8:
# joined, warmed up, its membership settled), then reads the processes'
# utime+stime from /proc over -secs seconds (default 10) and stops them.
# Prints one line per repetition and the median and range per binary, in
# milliseconds of CPU per second of idle, all members together.
set -euo pipefail
nodes=8 reps=5 secs=10 settle=8
while [ $# -gt 0 ]; do
	case "$1" in
	-n) nodes=$2; shift 2 ;;
	-reps) reps=$2; shift 2 ;;
	-secs) secs=$2; shift 2 ;;
	-settle) settle=$2; shift 2 ;;
	-*) echo "unknown flag $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { echo "usage: $0 [-n NODES] [-reps R] [-secs S] BINARY..." >&2; exit 2; }
tick=$(getconf CLK_TCK)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run() { # run BINARY: prints ms of CPU per second of idle
	local bin=$1 seeds="" pids=() i
	for i in $(seq 0 $((nodes - 1))); do seeds="$seeds,127.0.0.1:$((18000 + i))"; done
	for i in $(seq 0 $((nodes - 1))); do
		GOMAXPROCS=1 "$bin" node -bind 127.0.0.1:$((17000 + i)) -seeds "${seeds#,}" -log-level warn >"$logs/n$i.log" 2>&1 &
		pids+=($!)
	done
	sleep "$settle"
	ticks() { local t=0 p; for p in "${pids[@]}"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
	local c0 c1
	c0=$(ticks)
	sleep "$secs"
	c1=$(ticks)
	kill "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
	awk "BEGIN{printf \"%.1f\", ($c1 - $c0) * 1000 / $tick / $secs}"
}

declare -A got
for r in $(seq 1 "$reps"); do
	for bin in "$@"; do
		v=$(run "$bin")
		got[$bin]="${got[$bin]:-} $v"
		echo "rep $r $bin: $v ms/s"
	done
done
echo "nodes=$nodes secs=$secs reps=$reps cpus=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%FT%TZ)"
for bin in "$@"; do
	echo "${got[$bin]}" | tr ' ' '\n' | grep . | sort -n | awk -v b="$bin" '{a[NR]=$1} END {printf "%s: median %.1f ms/s (%.1f-%.1f), %d reps\n", b, (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2), a[1], a[NR], NR}'
done
