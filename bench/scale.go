package bench

import (
	"fmt"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// ScalePoint is one system's median on one scenario at one N, in units
// of the scenario's ideal time (S/B for broadcast and reduce), so that
// runs at different bandwidths compare.
type ScalePoint struct {
	Scenario string
	System   string
	Nodes    int
	Size     int64
	// Ratio is median / ideal; Lo and Hi are min / ideal and max / ideal
	// (a peer reports its own min and max).
	Ratio, Lo, Hi float64
}

// ScalePoints collects, from reports of the same scenarios at several N,
// every drawn result's time over its ideal, ordered by scenario, system
// and N. Systems not in keep are left out (nil keeps all).
func ScalePoints(reports []*Report, keep []string) []ScalePoint {
	var out []ScalePoint
	for _, r := range reports {
		for _, res := range r.Results {
			if !drawn(res) || res.Ideal <= 0 || (keep != nil && !slices.Contains(keep, res.System)) {
				continue
			}
			out = append(out, ScalePoint{Scenario: res.Scenario, System: res.System, Nodes: r.Nodes, Size: res.Size,
				Ratio: res.Median / res.Ideal, Lo: res.Min / res.Ideal, Hi: res.Max / res.Ideal})
		}
	}
	slices.SortFunc(out, func(a, b ScalePoint) int {
		if c := strings.Compare(a.Scenario, b.Scenario); c != 0 {
			return c
		}
		if c := strings.Compare(a.System, b.System); c != 0 {
			return c
		}
		return a.Nodes - b.Nodes
	})
	return out
}

// PlotScale draws time / ideal against N, one line per scenario and
// system (the min–max range as error bars): a flat line is a cost that
// does not grow with N.
func PlotScale(points []ScalePoint, title, path string) error {
	if len(points) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "N (hosts)"
	p.Y.Label.Text = "time / (S/B)"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	type key struct{ scenario, system string }
	var order []key
	lines := map[key]plotter.XYs{}
	errs := map[key]plotter.YErrors{}
	for _, pt := range points {
		k := key{pt.Scenario, pt.System}
		if _, ok := lines[k]; !ok {
			order = append(order, k)
		}
		lines[k] = append(lines[k], plotter.XY{X: float64(pt.Nodes), Y: pt.Ratio})
		errs[k] = append(errs[k], struct{ Low, High float64 }{pt.Ratio - pt.Lo, pt.Hi - pt.Ratio})
	}
	for i, k := range order {
		l, s, err := plotter.NewLinePoints(lines[k])
		if err != nil {
			return err
		}
		c := plotutil.Color(i)
		l.Color, s.Color = c, c
		s.Shape = plotutil.Shape(i)
		if strings.HasPrefix(k.system, "mpi") {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYer
			plotter.YErrorer
		}{lines[k], errs[k]})
		if err != nil {
			return err
		}
		eb.Color = c
		p.Add(l, s, eb)
		p.Legend.Add(k.scenario+" "+k.system, l, s)
	}
	p.Y.Min = 0
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}
