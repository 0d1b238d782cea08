package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/bench"
	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/sim"
)

const simUsage = `usage: hoplite sim [flags]

Simulates a Hoplite cluster of N hosts in virtual time, driving the real
cores (directory, fetch protocol, Reduce coordinator, failure broadcast,
barrier) over modelled links; see docs/simulator.md. Prints a table and
one RESULT line per comparison, as hoplite bench does, beside analytic
curves (binomial tree, pipelined chain, ring, the thesis's T(d)).

Flags:
`

// simCommand runs `hoplite sim`.
func simCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, simUsage); fs.PrintDefaults() }
	scenarios := fs.String("scenario", "broadcast,reduce,allreduce,async,notice,barrier", "scenarios: "+strings.Join(sim.Scenarios, ", "))
	nodes := fs.String("nodes", "2,4,8,16,32,64,128,256,512,1024", "host counts, comma-separated")
	size := fs.String("size", "32MiB", "object size S")
	bw := fs.String("bandwidth", "400mbit", "each host's up and down link (tc units, as the testbed)")
	lat := fs.Duration("latency", 50*time.Microsecond, "one-way latency L")
	cost := fs.Duration("msg-cost", 20*time.Microsecond, "processing time of one control message at a store node, shard or coordinator")
	shards := fs.Int("shards", 64, "directory shards")
	cpus := fs.Int("cpus", 0, "cores the hosts share, as the testbed's processes share its machine's (one job at a time per host); 0: a core per host")
	num := fs.Int("num", 0, "reduce: n of the N sources (0: all, or N-kill with --kill)")
	degree := fs.Int("degree", 0, "reduce and allreduce: the tree's degree (0: the cost model's)")
	shape := fs.String("allreduce-shape", "", "allreduce: sliced, d-ary (reduce, then broadcast), or empty for the cost model's choice")
	kill := fs.Int("kill", 0, "hosts killed during each run")
	killAt := fs.Float64("kill-at", 0.5, "when: a fraction of the failure-free time")
	pause := fs.Int("pause", 0, "hosts paused during each run (their processing stops; no failure is seen)")
	pauseAt := fs.Float64("pause-at", 0.5, "when: a fraction of the failure-free time")
	pauseFor := fs.Duration("pause-for", 50*time.Millisecond, "how long each paused host stops")
	interval := fs.Duration("interval", 0, "async: time between two sources' Puts (0: S/(4B))")
	slow := fs.Float64("slow-fraction", 0, "fraction of the hosts with half-speed links")
	seed := fs.Uint64("seed", 1, "seed: the same seed, the same timeline")
	jsonPath := fs.String("json", "", "write the reports (hoplite bench's JSON, one per N, in an array) here")
	plotPath := fs.String("plot", "", "write a scale plot per scenario: PATH with -SCENARIO before its extension (.png or .svg)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	S, err := bench.ParseSize(*size)
	if err != nil {
		return fmt.Errorf("--size: %w", err)
	}
	B, err := bench.ParseBandwidth(*bw)
	if err != nil {
		return fmt.Errorf("--bandwidth: %w", err)
	}
	var ns []int
	for _, f := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			return fmt.Errorf("--nodes: %q is not a host count of at least 2", f)
		}
		ns = append(ns, n)
	}
	scen := strings.Split(*scenarios, ",")
	var reports []*bench.Report
	for _, n := range ns {
		p := sim.DefaultParams(n)
		p.Bandwidth, p.Burst, p.Latency, p.Shards, p.Seed, p.SlowFraction = B.BitsPerSecond, sim.TestbedBurst(B.BitsPerSecond), *lat, *shards, *seed, *slow
		p.StoreCost, p.ShardCost, p.CoordCost = *cost, *cost, *cost
		p.CPUs = *cpus
		var outs []*sim.Outcome
		for _, sc := range scen {
			if err := ctx.Err(); err != nil {
				return err
			}
			sc := strings.TrimSpace(sc)
			k, ps := *kill, *pause
			// What a scenario does not simulate, it runs without.
			switch sc {
			case "barrier":
				k, ps = 0, 0
			case "notice":
				ps = 0
			case "async":
				k = 0
			}
			if (k != *kill || ps != *pause) && n == ns[0] {
				fmt.Fprintf(stderr, "hoplite sim: %s runs without --kill and --pause it does not simulate\n", sc)
			}
			o, err := sim.Run(sim.Config{Scenario: sc, Params: p, Size: S, Num: *num, Degree: *degree, Shape: *shape, Kill: k, KillAt: *killAt,
				Pause: ps, PauseAt: *pauseAt, PauseFor: *pauseFor, Interval: *interval})
			if err != nil {
				return err
			}
			outs = append(outs, o)
		}
		r := simReport(append([]string{"hoplite", "sim"}, args...), p, outs)
		reports = append(reports, r)
		r.WriteTable(stdout)
	}
	for _, r := range reports {
		for _, l := range r.ResultLines() {
			fmt.Fprintln(stdout, l)
		}
	}
	if *jsonPath != "" {
		b, err := json.MarshalIndent(reports, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if *plotPath != "" {
		var measured []scaleMeasured
		for _, m := range sim.TestbedMedians {
			// An AllReduce's measurement of the shape simulated: the
			// cost model's (the testbed's ours) unless --allreduce-shape.
			shaped := m.Scenario != "allreduce" || (*shape == "" && m.Shape != coordinator.ShapeDAry) || (*shape != "" && m.Shape == *shape)
			if m.Size == S && shaped {
				p := sim.DefaultParams(m.Nodes)
				p.Bandwidth = m.Bandwidth
				measured = append(measured, scaleMeasured{Scenario: m.Scenario, Nodes: m.Nodes, Ratio: m.Median / sim.Ideal(m.Scenario, m.Nodes, m.Size, p).Seconds()})
			}
		}
		ext := filepath.Ext(*plotPath)
		for _, sc := range scen {
			path := strings.TrimSuffix(*plotPath, ext) + "-" + strings.TrimSpace(sc) + ext
			if err := plotScale(reports, strings.TrimSpace(sc), measured, path); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "wrote", path)
		}
	}
	for _, r := range reports {
		for _, res := range r.Results {
			if res.Status == bench.StatusFailed {
				return fmt.Errorf("sim: %s at N=%d broke an invariant: %s", res.Scenario, r.Nodes, res.Reason)
			}
		}
	}
	return nil
}
