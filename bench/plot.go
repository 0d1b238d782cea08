package bench

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot draws the report into a PNG file in the style of the thesis's
// figures: latency (log scale) per system, bars grouped by object size,
// with each system's min–max range and the ideal time; for async, latency
// against the arrival interval (one line per system).
func Plot(r *Report, path string) error {
	p := plot.New()
	mode := r.Mode
	if mode == "" {
		mode = "in-process"
	}
	p.Title.Text = fmt.Sprintf("%s — N=%d, B=%s, median of %d (%s)", r.Scenario, r.Nodes, r.Bandwidth, r.Reps, mode)
	p.Y.Label.Text = "latency (s, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = ticks125{}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	var err error
	if r.Scenario == "async" && asyncIntervals(r) > 1 {
		err = asyncLines(p, r)
	} else {
		err = groupedBarPlot(p, r)
	}
	if err != nil {
		return err
	}
	w := 9 * vg.Inch
	if n := len(r.Results); n > 24 {
		w = vg.Length(math.Min(16, 9+float64(n-24)*0.2)) * vg.Inch
	}
	return p.Save(w, 5.5*vg.Inch, path)
}

func asyncIntervals(r *Report) int {
	var ivs []float64
	for _, res := range r.Results {
		if !slices.Contains(ivs, res.Interval) {
			ivs = append(ivs, res.Interval)
		}
	}
	return len(ivs)
}

// drawn says whether a result has times to draw: ok, or failed in some
// repetitions but not all (drawn with the count of failures).
func drawn(res Result) bool { return res.Median > 0 && res.Status != StatusSkipped }

// systemsOf lists the systems that have at least one time, in order.
func systemsOf(r *Report) []string {
	var out []string
	for _, res := range r.Results {
		if drawn(res) && !slices.Contains(out, res.System) {
			out = append(out, res.System)
		}
	}
	return out
}

func asyncLines(p *plot.Plot, r *Report) error {
	p.X.Label.Text = "arrival interval (s)"
	sizes := r.Sizes
	for i, sys := range systemsOf(r) {
		for _, size := range sizes {
			var pts plotter.XYs
			for _, res := range r.Results {
				if res.System == sys && res.Size == size && drawn(res) {
					pts = append(pts, plotter.XY{X: res.Interval, Y: res.Median})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
			l.Width = vg.Points(1.5)
			s.Shape = plotutil.Shape(i)
			p.Add(l, s)
			name := sys
			if len(sizes) > 1 {
				name += " " + SizeName(size)
			}
			p.Legend.Add(name, l, s)
		}
	}
	// The ideal, S/B, does not depend on the interval.
	var ideal plotter.XYs
	for _, res := range r.Results {
		if res.System == SysOurs {
			ideal = append(ideal, plotter.XY{X: res.Interval, Y: res.Ideal})
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, res := range r.Results {
		for _, v := range []float64{res.Median, res.Ideal} {
			if v > 0 && (res.ok() || v == res.Ideal) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if !math.IsInf(lo, 0) {
		p.Y.Min, p.Y.Max = lo/1.5, hi*6 // headroom for the legend
	}
	if len(ideal) > 0 {
		l, err := plotter.NewLine(ideal)
		if err != nil {
			return err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("ideal S/B", l)
	}
	p.Title.Text += ", time from the last arrival"
	return nil
}

// groupLabel is a comparison's label on the x axis.
func groupLabel(res Result, scenarios int) string {
	s := SizeName(res.Size)
	if scenarios > 1 {
		s = strings.TrimPrefix(res.Scenario, "failure-") + " " + s
	}
	if res.Scenario == "async" {
		s += fmt.Sprintf(" @%s", secs(res.Interval))
	}
	return s
}

func groupedBarPlot(p *plot.Plot, r *Report) error {
	var scenarios []string
	for _, res := range r.Results {
		if !slices.Contains(scenarios, res.Scenario) {
			scenarios = append(scenarios, res.Scenario)
		}
	}
	var labels []string
	for _, res := range r.Results {
		if l := groupLabel(res, len(scenarios)); !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	systems := systemsOf(r)
	if len(systems) == 0 {
		return fmt.Errorf("plot: no system has a time to draw")
	}
	b := &groupedBars{groups: len(labels), systems: systems, ideal: make([]float64, len(labels))}
	b.med = make([][]float64, len(systems))
	b.note = make([][]string, len(systems))
	b.lo = make([][]float64, len(systems))
	b.hi = make([][]float64, len(systems))
	for si := range systems {
		b.med[si] = nanSlice(len(labels))
		b.lo[si] = nanSlice(len(labels))
		b.hi[si] = nanSlice(len(labels))
		b.note[si] = make([]string, len(labels))
	}
	for _, res := range r.Results {
		gi := slices.Index(labels, groupLabel(res, len(scenarios)))
		b.ideal[gi] = res.Ideal
		si := slices.Index(systems, res.System)
		if si < 0 || !drawn(res) {
			continue
		}
		b.med[si][gi], b.lo[si][gi], b.hi[si][gi] = res.Median, res.Min, res.Max
		if n := res.Extra["failed_reps"]; n > 0 {
			b.note[si][gi] = fmt.Sprintf(" (+%d failed)", int(n))
		}
	}
	p.X.Label.Text = "object size"
	switch {
	case len(scenarios) > 1:
		p.X.Label.Text = "scenario, object size"
	case scenarios[0] == "async":
		p.X.Label.Text = "object size @ arrival interval"
		p.Title.Text += ", time from the last arrival"
	}
	p.NominalX(labels...)
	p.Add(b)
	for si, sys := range systems {
		thumb, err := plotter.NewBarChart(plotter.Values{1}, 1)
		if err != nil {
			return err
		}
		thumb.Color = plotutil.Color(si)
		thumb.LineStyle.Width = 0
		p.Legend.Add(sys, thumb)
	}
	ideal, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 1}})
	if err != nil {
		return err
	}
	ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	ideal.Width = vg.Points(1.5)
	p.Legend.Add("ideal", ideal)
	return nil
}

func nanSlice(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// groupedBars draws one bar per system in each group, from the bottom of
// the (log) axis up to the median, a min–max whisker, the median printed
// above, and the group's ideal as a dashed line across it. plotter's
// BarChart starts at 0, which a log axis cannot show.
type groupedBars struct {
	groups      int
	systems     []string
	med, lo, hi [][]float64 // [system][group]
	note        [][]string  // [system][group]: after the printed median
	ideal       []float64   // [group]
}

func (b *groupedBars) width() float64 { return 0.8 / float64(len(b.systems)) } // in groups

func (b *groupedBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	unit := trX(1) - trX(0)
	w := vg.Length(b.width()) * unit
	label := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 8), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YBottom}
	if len(b.systems)*b.groups > 24 {
		label.Rotation = math.Pi / 2
		label.XAlign, label.YAlign = draw.XLeft, draw.YCenter
	}
	whisker := draw.LineStyle{Color: color.Gray{Y: 40}, Width: vg.Points(1)}
	for si := range b.systems {
		for gi := 0; gi < b.groups; gi++ {
			v := b.med[si][gi]
			if math.IsNaN(v) {
				continue
			}
			x := trX(float64(gi)) + (vg.Length(si)-vg.Length(len(b.systems)-1)/2)*w
			top := trY(v)
			pts := []vg.Point{{X: x - w/2, Y: c.Min.Y}, {X: x - w/2, Y: top}, {X: x + w/2, Y: top}, {X: x + w/2, Y: c.Min.Y}}
			c.FillPolygon(plotutil.Color(si), c.ClipPolygonY(pts))
			lo, hi := trY(b.lo[si][gi]), trY(b.hi[si][gi])
			c.StrokeLines(whisker, c.ClipLinesY([]vg.Point{{X: x, Y: lo}, {X: x, Y: hi}})...)
			c.StrokeLines(whisker, c.ClipLinesY([]vg.Point{{X: x - w/4, Y: hi}, {X: x + w/4, Y: hi}})...)
			c.StrokeLines(whisker, c.ClipLinesY([]vg.Point{{X: x - w/4, Y: lo}, {X: x + w/4, Y: lo}})...)
			at := vg.Point{X: x, Y: max(top, hi) + vg.Points(2)}
			if c.Contains(at) {
				c.FillText(label, at, shortSecs(v)+b.note[si][gi])
			}
		}
	}
	dash := draw.LineStyle{Color: color.Black, Width: vg.Points(1.5), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}
	for gi, v := range b.ideal {
		if v <= 0 {
			continue
		}
		x := trX(float64(gi))
		half := vg.Length(0.45) * unit
		c.StrokeLines(dash, c.ClipLinesY([]vg.Point{{X: x - half, Y: trY(v)}, {X: x + half, Y: trY(v)}})...)
	}
}

func shortSecs(s float64) string {
	switch {
	case s >= 10:
		return fmt.Sprintf("%.0fs", s)
	case s >= 1:
		return fmt.Sprintf("%.2fs", s)
	case s >= 0.01:
		return fmt.Sprintf("%.0fms", s*1000)
	case s >= 0.001:
		return fmt.Sprintf("%.1fms", s*1000)
	case s >= 0.00001:
		return fmt.Sprintf("%.0fµs", s*1e6)
	}
	return fmt.Sprintf("%.1fµs", s*1e6)
}

// DataRange spans the groups and, with room above for the labels, every
// time and ideal.
func (b *groupedBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = math.Inf(1), math.Inf(-1)
	see := func(v float64) {
		if v > 0 && !math.IsNaN(v) {
			ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
		}
	}
	for si := range b.systems {
		for gi := 0; gi < b.groups; gi++ {
			see(b.lo[si][gi])
			see(b.hi[si][gi])
		}
	}
	for _, v := range b.ideal {
		see(v)
	}
	if math.IsInf(ymin, 0) {
		ymin, ymax = 0.001, 1
	}
	// Headroom above the tallest bar for the legend (top left).
	return -0.5, float64(b.groups) - 0.5, ymin / 2, ymax * 8
}

// ticks125 labels a log axis at 1, 2 and 5 times each power of ten (with
// unlabelled ticks between): plot.LogTicks labels only the powers of ten,
// which leaves a narrow range without a number.
type ticks125 struct{}

func (ticks125) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for m := 1; m < 10; m++ {
			v := float64(m) * base
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			out = append(out, t)
		}
	}
	return out
}
