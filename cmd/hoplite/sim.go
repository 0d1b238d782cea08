package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/bench"
	"github.com/hoplite-go/hoplite/internal/reduction"
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
	fs.SetOutput(flagOutput(stderr, "sim"))
	fs.Usage = func() { fmt.Fprint(stderr, simUsage); fs.PrintDefaults() }
	scenarios := fs.String("scenario", "broadcast,reduce,allreduce,async,notice,barrier", "scenarios: "+strings.Join(sim.Scenarios, ", ")+"; or membership, alone (the automanaged membership: formation, a kill, a pause)")
	nodes := fs.String("nodes", "2,4,8,16,32,64,128,256,512,1024", "host counts, comma-separated")
	size := fs.String("size", "32MiB", "object size S")
	bw := fs.String("bandwidth", "400mbit", "each host's up and down link (tc units, as the testbed)")
	lat := fs.Duration("latency", 50*time.Microsecond, "one-way latency L")
	cpuModel := fs.String("cpu-model", "testbed", "the CPU a host pays a byte: testbed (fitted to the testbed's shaped links, 2.1 ns a byte received) or unshaped (measured where the links do not bound, 0.64 ns; for links faster than the testbed's, e.g. --bandwidth 10gbit)")
	cost := fs.Duration("msg-cost", 20*time.Microsecond, "processing time of one control message at a store node, shard or coordinator")
	shards := fs.Int("shards", 64, "directory shards")
	singleUpdates := fs.Bool("single-updates", false, "a Reduce coordinator's Subscribes go one by one and each streamed source's location comes in an actor message of its own, as before coordinators grouped their Subscribes by shard: for comparison")
	listRingTasks := fs.Bool("list-ring-tasks", false, "a sliced AllReduce's coordinator lists every participant's 2n tasks (about 400 bytes each, n² in all through its uplink), as before it stated each participant's share in a few hundred bytes: for comparison")
	actorLocates := fs.Bool("actor-locates", false, "every Locate is answered by its shard's table (ShardCost), as before members answered a published inline object's Locates on the data plane without the shard: for comparison")
	cpus := fs.Int("cpus", 0, "cores the hosts share, as the testbed's processes share its machine's (one job at a time per host); 0: a core per host")
	num := fs.Int("num", 0, "reduce: n of the N sources (0, or more than N: all, or N-kill with --kill)")
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
	chunk := fs.String("chunk", "", "the transfer chunk (a cluster's fixed storenode ChunkSize); empty: what adapting members choose (plan.ChunkForObject, or the chunk a Get's shard chose for the tree's depth)")
	fanOut := fs.Int("fanout", 0, "receivers a copy streams to at once (a directory shard's TableConfig.FanOut): 0, the cost model's choice for the receivers expected (a cluster's); 1, a chain; -1, as many as an uplink feeds at the rate a receiver takes bytes in (directory.FanOutFor)")
	deputies := fs.Int("locate-deputies", 0, "groups of Locate deputies (a host's Locates of another host's shard go through its group's deputy, which sends a hot small object's in batches): 0, as members choose (16 from 512 hosts on, none below); -1, none")
	stripes := fs.Int("stripes", 0, "broadcast: cut the object into this many stripes, each receiver interior in one stripe's tree and a leaf in the others (directory.StripeTrees); 0 or 1: one sender a receiver")
	jsonPath := fs.String("json", "", "write the reports (hoplite bench's JSON, one per N, in an array) here")
	plotPath := fs.String("plot", "", "write a scale plot per scenario: PATH with -SCENARIO before its extension (.png or .svg)")
	mflags := membershipFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	S, err := bench.ParseSize(*size)
	if err != nil {
		return usageError{fmt.Sprintf("--size: %v", err)}
	}
	var chunkBytes int64
	if *chunk != "" {
		if chunkBytes, err = bench.ParseSize(*chunk); err != nil || chunkBytes <= 0 {
			return usageError{fmt.Sprintf("--chunk %q: want a size above 0", *chunk)}
		}
	}
	if *fanOut < -1 {
		return usageError{fmt.Sprintf("--fanout %d: want -1 or more", *fanOut)}
	}
	B, err := bench.ParseBandwidth(*bw)
	if err != nil {
		return usageError{fmt.Sprintf("--bandwidth: %v", err)}
	}
	var ns []int
	for _, f := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			return usageError{fmt.Sprintf("--nodes: %q is not a host count of at least 2", f)}
		}
		ns = append(ns, n)
	}
	if strings.TrimSpace(*scenarios) == "membership" {
		return simMembership(ctx, fs, mflags, ns, *seed, *lat, *cost, *pauseFor, *jsonPath, stdout)
	}
	scen := strings.Split(*scenarios, ",")
	for i := range scen {
		scen[i] = strings.TrimSpace(scen[i])
		if !slices.Contains(sim.Scenarios, scen[i]) {
			return usageError{fmt.Sprintf("--scenario: unknown scenario %q: want one of %s", scen[i], strings.Join(sim.Scenarios, ", "))}
		}
	}
	// Every value checked before the first run: a value the model cannot
	// take would otherwise end a run half-way or print a meaningless table.
	smallest := slices.Min(ns)
	kills := slices.ContainsFunc(scen, func(sc string) bool { return sc != "barrier" && sc != "async" })
	pauses := slices.ContainsFunc(scen, func(sc string) bool { return sc != "barrier" && sc != "notice" })
	inline := slices.ContainsFunc(scen, func(sc string) bool { return sc == "reduce" || sc == "allreduce" || sc == "async" })
	for _, c := range []struct {
		bad bool
		msg string
	}{
		{*shards < 1, fmt.Sprintf("--shards %d: want at least 1", *shards)},
		{*cpus < 0, fmt.Sprintf("--cpus %d: want 0 (a core per host) or more", *cpus)},
		{*num < 0, fmt.Sprintf("--num %d: want 0 (all) or more", *num)},
		{*degree < 0, fmt.Sprintf("--degree %d: want 0 (the cost model's) or more", *degree)},
		{*shape != "" && *shape != reduction.ShapeSliced && *shape != reduction.ShapeDAry,
			fmt.Sprintf("--allreduce-shape %q: want %s, %s or empty", *shape, reduction.ShapeSliced, reduction.ShapeDAry)},
		{inline && S < sim.InlineLimit, fmt.Sprintf("--size %d: reduce, allreduce and async of objects under %d bytes (inline sources) are not simulated", S, sim.InlineLimit)},
		{*kill < 0 || kills && *kill > smallest-2, fmt.Sprintf("--kill %d: want 0 up to the smallest --nodes less 2, %d", *kill, max(0, smallest-2))},
		{*pause < 0 || pauses && *pause > smallest-2, fmt.Sprintf("--pause %d: want 0 up to the smallest --nodes less 2, %d", *pause, max(0, smallest-2))},
		{*killAt < 0 || *killAt > 1, fmt.Sprintf("--kill-at %v: want a fraction, 0..1", *killAt)},
		{*pauseAt < 0 || *pauseAt > 1, fmt.Sprintf("--pause-at %v: want a fraction, 0..1", *pauseAt)},
		{*slow < 0 || *slow > 1, fmt.Sprintf("--slow-fraction %v: want a fraction, 0..1", *slow)},
		{*lat < 0, fmt.Sprintf("--latency %v: want 0 or more", *lat)},
		{*cost < 0, fmt.Sprintf("--msg-cost %v: want 0 or more", *cost)},
		{*pauseFor <= 0, fmt.Sprintf("--pause-for %v: want a positive duration", *pauseFor)},
		{*stripes < 0, fmt.Sprintf("--stripes %d: want 0 or more", *stripes)},
		{*deputies < -1, fmt.Sprintf("--locate-deputies %d: want -1 (none), 0 (as members choose) or more", *deputies)},
		{*interval < 0, fmt.Sprintf("--interval %v: want 0 (S/(4B)) or more", *interval)},
		{!slices.Contains(sim.CPUModels, *cpuModel), fmt.Sprintf("--cpu-model %q: want one of %s", *cpuModel, strings.Join(sim.CPUModels, ", "))},
	} {
		if c.bad {
			return usageError{c.msg}
		}
	}
	var reports []*bench.Report
	for _, n := range ns {
		p, err := sim.DefaultParams(n).WithCPUModel(*cpuModel)
		if err != nil {
			return err
		}
		p.Bandwidth, p.Burst, p.Latency, p.Shards, p.Seed, p.SlowFraction = B.BitsPerSecond, sim.TestbedBurst(B.BitsPerSecond), *lat, *shards, *seed, *slow
		p.StoreCost, p.ShardCost, p.CoordCost = *cost, *cost, *cost
		p.ActorLocates = *actorLocates
		p.ListRingTasks = *listRingTasks
		p.SingleUpdates = *singleUpdates
		p.CPUs = *cpus
		p.FanOut = *fanOut
		p.Stripes = *stripes
		p.Deputies = *deputies
		if p.FanOut < 0 {
			p.FanOut = p.LinkFanOut()
		}
		p.Chunk = chunkBytes
		var outs []*sim.Outcome
		for _, sc := range scen {
			if err := ctx.Err(); err != nil {
				return err
			}
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
			o, err := sim.RunContext(ctx, sim.Config{Scenario: sc, Params: p, Size: S, Num: *num, Degree: *degree, Shape: *shape, Kill: k, KillAt: *killAt,
				Pause: ps, PauseAt: *pauseAt, PauseFor: *pauseFor, Interval: *interval})
			if err != nil {
				// The package's errors name it; the command's prefix
				// says "hoplite sim" already.
				return errors.New(strings.TrimPrefix(err.Error(), "sim: "))
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
			shaped := m.Scenario != "allreduce" || (*shape == "" && m.Shape != reduction.ShapeDAry) || (*shape != "" && m.Shape == *shape)
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
				return fmt.Errorf("%s at N=%d broke an invariant: %s", res.Scenario, r.Nodes, res.Reason)
			}
		}
	}
	return nil
}
