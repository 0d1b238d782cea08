package bench

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestOursUIWatchesTheLiveView: --peers ui adds the ours-ui column,
// measured like ours, and its repetitions run with a client reading host
// 0's live view feed: the client read the broadcasts' transfers.
func TestOursUIWatchesTheLiveView(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Scenario: "broadcast", Nodes: 3, Sizes: []int64{256 << 10}, Reps: 2, Peers: []string{"ui"}})
	if err != nil {
		t.Fatal(err)
	}
	var ui *Result
	for i, r := range rep.Results {
		if r.System == SysOursUI {
			ui = &rep.Results[i]
		}
	}
	if ui == nil || !ui.ok() || len(ui.Times) != 2 {
		t.Fatalf("no ours-ui result with 2 reps: %+v", rep.Results)
	}
	read := regexp.MustCompile(`^ours-ui: a client read host 0's live view feed during (\d+) repetitions .*: (\d+) frames, (\d+) events`)
	for _, n := range rep.Notes {
		if m := read.FindStringSubmatch(n); m != nil {
			reps, _ := strconv.Atoi(m[1])
			events, _ := strconv.Atoi(m[3])
			// Each broadcast to 2 receivers is 2 streams: 4 events.
			if reps < 2 || events < 4*reps {
				t.Fatalf("the client watched %d repetitions and read %d events: %s", reps, events, n)
			}
			return
		}
	}
	t.Fatalf("no note on the live view's client: %q", rep.Notes)
}
