package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/bench"
	"github.com/hoplite-go/hoplite/coordinator"
)

// Ideal is the scenario's ideal time, as hoplite bench computes it: S/B
// at the link's rate (B/8, not the payload rate), 2(n-1)/n·S/B for
// AllReduce; the notice's and the barrier's are the binomial model's.
func Ideal(scenario string, n int, S int64, p Params) time.Duration {
	sb := float64(S) / (p.Bandwidth / 8)
	switch scenario {
	case "allreduce":
		sb *= 2 * float64(n-1) / float64(n)
	case "notice", "barrier":
		return Analytic(SysBinomial, scenario, n, S, p)
	}
	return time.Duration(sb * float64(time.Second))
}

// Report turns outcomes of one N into hoplite bench's report: ours is
// the simulation (ours-failure with a kill), and every analytic system
// is a result of its own. Nothing in it depends on the machine or the
// wall clock, so one seed gives one file byte for byte.
func Report(command []string, p Params, outs []*Outcome) *bench.Report {
	r := &bench.Report{Mode: "simulated", Command: command, Nodes: p.N, BandwidthBits: p.Bandwidth,
		Bandwidth: fmt.Sprintf("%g Mbit/s", p.Bandwidth/1e6), Reps: 1, Peers: AnalyticSystems}
	var scen []string
	for _, o := range outs {
		if len(scen) == 0 || scen[len(scen)-1] != o.Scenario {
			scen = append(scen, o.Scenario)
		}
		if len(r.Sizes) == 0 || r.Sizes[len(r.Sizes)-1] != o.Size {
			r.Sizes = append(r.Sizes, o.Size)
		}
		ideal := Ideal(o.Scenario, o.Nodes, o.Size, p).Seconds()
		sys := SysSim
		if (len(o.Killed) > 0 || len(o.Paused) > 0) && o.Scenario != "notice" {
			sys = SysFailure
		}
		res := bench.Result{Scenario: o.Scenario, Size: o.Size, Interval: o.Interval.Seconds(), System: sys, Status: bench.StatusOK, Reps: 1,
			Times: []float64{o.Time.Seconds()}, Median: o.Time.Seconds(), Min: o.Time.Seconds(), Max: o.Time.Seconds(), Ideal: ideal,
			Extra: map[string]float64{
				"depth": float64(o.Depth), "degree": float64(o.Degree),
				"shard_queue_s": o.ShardQueue.Seconds(), "coord_queue_s": o.CoordQueue.Seconds(),
				"hot_shard_messages": float64(o.HotShard), "messages": float64(o.Messages),
				"events": float64(o.Events), "violations": float64(len(o.Violations)),
			}}
		if o.Shape == coordinator.ShapeSliced {
			res.Extra["sliced"] = 1
		}
		if o.FailureFree > 0 {
			res.Extra["failure_free_s"] = o.FailureFree.Seconds()
			res.Extra["killed_at_s"] = o.KilledAt.Seconds()
			res.Extra["killed"] = float64(len(o.Killed))
			res.Extra["paused"] = float64(len(o.Paused))
		}
		if len(o.Violations) > 0 {
			res.Status, res.Reason = bench.StatusFailed, strings.Join(o.Violations, "; ")
		}
		r.Results = append(r.Results, res)
		for _, a := range AnalyticSystems {
			t := Analytic(a, o.Scenario, o.Nodes, o.Size, p)
			if t <= 0 {
				continue
			}
			res := bench.Result{Scenario: o.Scenario, Size: o.Size, Interval: o.Interval.Seconds(), System: a, Status: bench.StatusOK, Reps: 1,
				Median: t.Seconds(), Min: t.Seconds(), Max: t.Seconds(), Ideal: ideal}
			if o.Time > 0 {
				res.Ratio = t.Seconds() / o.Time.Seconds()
			}
			r.Results = append(r.Results, res)
		}
	}
	r.Scenario = strings.Join(scen, ",")
	r.Notes = append(r.Notes, fmt.Sprintf("simulated: L=%v, payload %.4g of the link, store/shard/coordinator message costs %v/%v/%v, %d shards, seed %d",
		p.Latency, p.PayloadEfficiency, p.StoreCost, p.ShardCost, p.CoordCost, p.Shards, p.Seed))
	return r
}
