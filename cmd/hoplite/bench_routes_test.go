package main

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/bench"
)

// TestBenchRoutesFlagErrors: a bad command line is a usage error (exit
// 2) that names the flag, before anything starts.
func TestBenchRoutesFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "routes", "--size", "0"}, "-size"},
		{[]string{"bench", "routes", "--size", "5GiB"}, "-size"},
		{[]string{"bench", "routes", "--size", "1QB"}, "-size"},
		{[]string{"bench", "routes", "--reps", "0"}, "--reps"},
		{[]string{"bench", "routes", "extra"}, "unexpected arguments"},
	} {
		code, _, stderr := hoplite(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "hoplite bench routes: ") {
			t.Errorf("%q: exit %d, stderr %q; want 2, \"hoplite bench routes: \" and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestBenchRoutes runs `hoplite bench routes` (a built binary: it starts
// `hoplite node`, `put`, `get` from its own executable) with a 4 MiB
// object, 2 reps. Every route has its result in the JSON report and its
// row in the table, each of its reps timed and its bytes verified, and
// its ratio is its median over the baseline's of the same run, as the
// table prints it.
func TestBenchRoutes(t *testing.T) {
	bin := builtHoplite(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "routes.json")
	cmd := exec.CommandContext(ctx, bin, "bench", "routes", "--size", "4MiB", "--reps", "2", "--json", path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench routes: %v\n%s\n%s", err, out, stderr.String())
	}
	r, err := bench.ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Scenario != "routes" || r.Reps != 2 || r.Warmup != 0 || !slices.Equal(r.Sizes, []int64{4 << 20}) ||
		!slices.Equal(r.Command, []string{"hoplite", "bench", "routes", "--size", "4MiB", "--reps", "2", "--json", path}) {
		t.Errorf("report: scenario %q, %d reps, warm-up %d, sizes %v, command %q", r.Scenario, r.Reps, r.Warmup, r.Sizes, r.Command)
	}
	want := map[string][]string{
		bench.RoutesGet: {bench.RouteM2M, bench.RouteClient, bench.RouteClientInto, bench.RouteActor, bench.RouteRemoteActor,
			bench.RouteRemoteActorData, bench.RouteDial, bench.RouteDialInto, bench.RouteCLI},
		bench.RoutesPut: {bench.RouteM2M, bench.RouteClient, bench.RouteActor, bench.RouteRemoteActor, bench.RouteRemoteActorData,
			bench.RouteDial, bench.RouteCLI},
		bench.RoutesCLIStart: {bench.RouteCLIVersion, bench.RouteCLIMembers},
	}
	base := map[string]bench.Result{}
	n := 0
	for _, res := range r.Results {
		if res.System == bench.RouteM2M {
			base[res.Scenario] = res
		}
	}
	if len(base[bench.RoutesGet].Times) != 2 || !slices.Equal(base[bench.RoutesGet].Times, base[bench.RoutesPut].Times) {
		t.Fatalf("the baseline's times: get %v, put %v; want the same 2", base[bench.RoutesGet].Times, base[bench.RoutesPut].Times)
	}
	for _, res := range r.Results {
		if !slices.Contains(want[res.Scenario], res.System) {
			t.Errorf("unexpected result %s %s", res.Scenario, res.System)
			continue
		}
		n++
		label := res.Scenario + " " + res.System
		if res.Status != bench.StatusOK || res.Reps != 2 || len(res.Times) != 2 || res.Extra["verified_reps"] != 2 || res.Size != 4<<20 {
			t.Errorf("%s: status %s (%s), %d reps, times %v, %v verified, size %d", label, res.Status, res.Reason, res.Reps, res.Times, res.Extra["verified_reps"], res.Size)
		}
		lo, hi := slices.Min(res.Times), slices.Max(res.Times)
		if lo <= 0 || res.Min != lo || res.Max != hi || math.Abs(res.Median-(lo+hi)/2) > 1e-9 {
			t.Errorf("%s: median %v min %v max %v of %v", label, res.Median, res.Min, res.Max, res.Times)
		}
		row := tableRow(string(out), res.Scenario, res.System)
		if row == nil {
			t.Errorf("%s: no table row:\n%s", label, out)
			continue
		}
		if res.Scenario == bench.RoutesCLIStart {
			continue
		}
		ratio := res.Median / base[res.Scenario].Median
		if got := bench.RouteRatio(res); math.Abs(got-ratio) > 1e-9*ratio {
			t.Errorf("%s: ratio %v, want %v (%v over the baseline's %v)", label, got, ratio, res.Median, base[res.Scenario].Median)
		}
		if row[len(row)-2] != fmt.Sprintf("%.2f", ratio) {
			t.Errorf("%s: table row %q, want the ratio %.2f", label, row, ratio)
		}
	}
	if n != 18 {
		t.Errorf("%d results, want 18:\n%s", n, out)
	}
}

// tableRow is the fields of the routes table's row of scenario and
// system (nil if there is none).
func tableRow(out, scenario, system string) []string {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == scenario && f[1] == system {
			return f
		}
	}
	return nil
}
