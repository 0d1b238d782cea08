package main

import (
	"fmt"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/hoplite-go/hoplite/bench"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/sim"
)

// simReport turns outcomes of one N into hoplite bench's report: ours is
// the simulation (ours-failure with a kill), and every analytic system
// is a result of its own. Nothing in it depends on the machine or the
// wall clock, so one seed gives one file byte for byte.
func simReport(command []string, p sim.Params, outs []*sim.Outcome) *bench.Report {
	r := &bench.Report{Mode: "simulated", Command: command, Nodes: p.N, BandwidthBits: p.Bandwidth,
		Bandwidth: fmt.Sprintf("%g Mbit/s", p.Bandwidth/1e6), Reps: 1, Peers: sim.AnalyticSystems}
	var scen []string
	for _, o := range outs {
		if len(scen) == 0 || scen[len(scen)-1] != o.Scenario {
			scen = append(scen, o.Scenario)
		}
		if len(r.Sizes) == 0 || r.Sizes[len(r.Sizes)-1] != o.Size {
			r.Sizes = append(r.Sizes, o.Size)
		}
		ideal := sim.Ideal(o.Scenario, o.Nodes, o.Size, p).Seconds()
		sys := sim.SysSim
		if (len(o.Killed) > 0 || len(o.Paused) > 0) && o.Scenario != "notice" {
			sys = sim.SysFailure
		}
		res := bench.Result{Scenario: o.Scenario, Size: o.Size, Interval: o.Interval.Seconds(), System: sys, Status: bench.StatusOK, Reps: 1,
			Times: []float64{o.Time.Seconds()}, Median: o.Time.Seconds(), Min: o.Time.Seconds(), Max: o.Time.Seconds(), Ideal: ideal,
			Extra: map[string]float64{
				"depth": float64(o.Depth), "degree": float64(o.Degree),
				"shard_queue_s": o.ShardQueue.Seconds(), "coord_queue_s": o.CoordQueue.Seconds(),
				"hot_shard_messages": float64(o.HotShard), "messages": float64(o.Messages),
				"events": float64(o.Events), "violations": float64(len(o.Violations)),
				"max_upload_bytes": float64(o.MaxUpload), "quick_locates": float64(o.QuickLocates),
			}}
		if o.DeputyBatches > 0 {
			res.Extra["deputy_batches"] = float64(o.DeputyBatches)
		}
		if o.Shape == reduction.ShapeSliced {
			res.Extra["sliced"] = 1
			if o.RingGather {
				res.Extra["ring_gather"] = 1
			}
		}
		if o.FailureFree > 0 {
			res.Extra["failure_free_s"] = o.FailureFree.Seconds()
			res.Extra["kill_at_s"] = o.KilledAt.Seconds() // the key hoplite bench's table reads
			res.Extra["killed"] = float64(len(o.Killed))
			res.Extra["paused"] = float64(len(o.Paused))
		}
		if len(o.Violations) > 0 {
			res.Status, res.Reason = bench.StatusFailed, strings.Join(o.Violations, "; ")
		}
		r.Results = append(r.Results, res)
		for _, a := range sim.AnalyticSystems {
			t := sim.Analytic(a, o.Scenario, o.Nodes, o.Size, p)
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
	r.Notes = append(r.Notes, fmt.Sprintf("simulated: L=%v, payload %.4g of the link, store/shard/coordinator message costs %v/%v/%v, CPU %.3g ns a byte received and %.3g more a byte reduced, %d shards, seed %d",
		p.Latency, p.PayloadEfficiency, p.StoreCost, p.ShardCost, p.CoordCost, p.ByteCost*1e9, p.ReduceCost*1e9, p.Shards, p.Seed))
	return r
}

// scaleMeasured is a testbed median to draw beside the simulation.
type scaleMeasured struct {
	Scenario string
	Nodes    int
	Ratio    float64 // median / ideal
}

// plotScale draws time / ideal (S/B for broadcast and reduce) against N
// on a log2 axis for one scenario: the simulation, each analytic system
// (dashed), and the testbed's measured medians as points.
func plotScale(reports []*bench.Report, scenario string, measured []scaleMeasured, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — simulated Hoplite vs analytic models (time / ideal)", scenario)
	p.X.Label.Text = "N (hosts)"
	p.Y.Label.Text = "time / ideal"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = log2Ticks{}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	lines := map[string]plotter.XYs{}
	var order []string
	for _, r := range reports {
		for _, res := range r.Results {
			if res.Scenario != scenario || res.Ideal <= 0 || res.Median <= 0 {
				continue
			}
			if _, ok := lines[res.System]; !ok {
				order = append(order, res.System)
			}
			lines[res.System] = append(lines[res.System], plotter.XY{X: float64(r.Nodes), Y: res.Median / res.Ideal})
		}
	}
	if len(order) == 0 {
		return fmt.Errorf("nothing to plot for %s", scenario)
	}
	for i, sys := range order {
		xy := lines[sys]
		slices.SortFunc(xy, func(a, b plotter.XY) int { return int(a.X - b.X) })
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		l.Color, s.Color, s.Shape = c, c, plotutil.Shape(i)
		if sys != sim.SysSim && sys != sim.SysFailure {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		} else {
			l.Width = vg.Points(2)
		}
		name := sys
		if sys == sim.SysSim {
			name = "hoplite (simulated)"
		}
		p.Add(l, s)
		p.Legend.Add(name, l, s)
	}
	var pts plotter.XYs
	for _, m := range measured {
		if m.Scenario == scenario {
			pts = append(pts, plotter.XY{X: float64(m.Nodes), Y: m.Ratio})
		}
	}
	if len(pts) > 0 {
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		s.Shape = draw.CrossGlyph{}
		s.Radius = vg.Points(5)
		s.Color = color.Black
		p.Add(s)
		p.Legend.Add("testbed (measured)", s)
	}
	p.Y.Min = 0
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

type log2Ticks struct{}

func (log2Ticks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for v := 1.0; v <= hi*1.01; v *= 2 {
		if v >= lo*0.99 {
			t = append(t, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
		}
	}
	return t
}
