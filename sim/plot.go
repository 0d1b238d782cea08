package sim

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/hoplite-go/hoplite/bench"
)

// Measured is a testbed median to draw beside the simulation.
type Measured struct {
	Scenario string
	Nodes    int
	Ratio    float64 // median / ideal
}

// PlotScale draws time / ideal (S/B for broadcast and reduce) against N
// on a log2 axis for one scenario: the simulation, each analytic system
// (dashed), and the testbed's measured medians as points.
func PlotScale(reports []*bench.Report, scenario string, measured []Measured, path string) error {
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
		return fmt.Errorf("sim: nothing to plot for %s", scenario)
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
		if sys != SysSim && sys != SysFailure {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		} else {
			l.Width = vg.Points(2)
		}
		name := sys
		if sys == SysSim {
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
