package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
)

func quietLog() *logrus.Logger {
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	return log
}

// tinySetup: 128 KiB of weights (above the inline limit, so the Reduce
// builds a tree and the weights move in 32 KiB chunks), at memory speed.
func tinySetup() setup {
	return setup{workers: 4, features: 16, active: 2, outputs: 2048, batch: 8, rounds: 12,
		compute: 2 * time.Millisecond, lr: 1, chunk: 32 << 10, seed: 7}
}

// checker is the test's observe hook: every round it recomputes, from the
// gradient objects the Reduce says it used, what the server must have
// done, and counts what the stores hold.
type checker struct {
	s           setup
	rounds      int
	contributed map[string]bool // workers whose gradients were reduced
	// assigned is the weights version the server gave each worker: 0, then
	// the round's new version each time the worker's gradient is reduced.
	assigned map[string]int
	maxIDs   int // most distinct object ids in the stores at once
}

func (c *checker) observe(l *cluster.Local, rec roundRecord) error {
	s, p, m := c.s, c.s.params(), c.s.contributors()
	if rec.round != c.rounds {
		return fmt.Errorf("round %d observed after %d rounds", rec.round, c.rounds)
	}
	c.rounds++
	// The Reduce names m gradients reduced and the others unreduced, one
	// per worker, each worker's next one.
	if len(rec.reduced) != m || len(rec.reduced)+len(rec.unreduced) != s.workers {
		return fmt.Errorf("reduced %v, unreduced %v: want %d of %d", rec.reduced, rec.unreduced, m, s.workers)
	}
	seen := map[string]bool{}
	for _, id := range slices.Concat(rec.reduced, rec.unreduced) {
		w, _, ok := strings.Cut(strings.TrimPrefix(id, "ps/grad/"), "/")
		if !ok || seen[w] {
			return fmt.Errorf("source %q: not one gradient per worker in %v %v", id, rec.reduced, rec.unreduced)
		}
		seen[w] = true
	}
	// The sum is exactly the reduced gradients: fetched one by one here and
	// added in float64, element by element (the tree adds in another order).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	want := make([]float64, p+extras)
	for _, id := range rec.reduced {
		data, err := l.Client(0).Get(ctx, id)
		if err != nil {
			return fmt.Errorf("get %s: %w", id, err)
		}
		g := decodeInto(nil, data)
		if len(g) != p+extras || g[p+extraCount] != 1 {
			return fmt.Errorf("%s: %d floats, count %v", id, len(g), g[p+extraCount])
		}
		// Only contributors get new weights: each gradient was computed on
		// the version its worker was given when its previous one was reduced.
		w, _, _ := strings.Cut(strings.TrimPrefix(id, "ps/grad/"), "/")
		if v := int(g[p+extraVersion]); v != c.assigned[w] {
			return fmt.Errorf("%s was computed on weights v%d, its worker was given v%d", id, v, c.assigned[w])
		}
		c.assigned[w] = rec.round + 1
		c.contributed[w] = true
		for j, x := range g {
			want[j] += float64(x)
		}
	}
	for j, x := range rec.sum {
		if d := math.Abs(float64(x) - want[j]); d > 1e-4*(1+math.Abs(want[j])) {
			return fmt.Errorf("sum[%d] = %v, the reduced gradients add up to %v", j, x, want[j])
		}
	}
	// The new weights are the old ones minus lr/m times that sum, to the bit.
	step := float32(s.lr / float64(m))
	for j := range p {
		if w := rec.old[j] - step*rec.sum[j]; rec.updated[j] != w {
			return fmt.Errorf("weights[%d] = %v, want %v - %v*%v = %v", j, rec.updated[j], rec.old[j], step, rec.sum[j], w)
		}
	}
	// Memory stays bounded: at most one outstanding gradient per worker, a
	// weights version per worker plus the newest, this round's sum, and
	// what the previous round's Deletes may not have freed yet.
	ids := map[string]bool{}
	for i := range l.Nodes() {
		for _, id := range l.Objects(i) {
			ids[id] = true
		}
	}
	c.maxIDs = max(c.maxIDs, len(ids))
	if limit := 2*s.workers + m + 3; len(ids) > limit {
		return fmt.Errorf("%d distinct objects in the stores, more than %d: %v", len(ids), limit, ids)
	}
	return nil
}

func TestTrainingAppliesExactlyTheReducedGradients(t *testing.T) {
	for _, naive := range []bool{false, true} {
		t.Run(fmt.Sprintf("naive=%v", naive), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			s := tinySetup()
			c := &checker{s: s, contributed: map[string]bool{}, assigned: map[string]int{}}
			s.observe = c.observe
			res, err := train(ctx, s, naive, quietLog())
			if err != nil {
				t.Fatal(err)
			}
			if c.rounds != s.rounds || len(res.stats) != s.rounds {
				t.Fatalf("%d rounds observed, %d reported, want %d", c.rounds, len(res.stats), s.rounds)
			}
			if want := s.rounds * s.contributors() * s.batch; res.samples != want {
				t.Errorf("%d samples, want %d", res.samples, want)
			}
			wantShape := "d-ary"
			if naive {
				wantShape = "naive-gather"
			}
			if res.shape != wantShape {
				t.Errorf("reduce shape %q, want %q", res.shape, wantShape)
			}
			// Asynchrony: workers left out of a round were reduced later, on
			// stale weights, and nobody starved.
			if len(c.contributed) != s.workers {
				t.Errorf("only workers %v contributed, want all %d", c.contributed, s.workers)
			}
			stale := false
			for _, st := range res.stats {
				stale = stale || st.staleness > 0
			}
			if !stale {
				t.Errorf("no round reduced a stale gradient: %+v", res.stats)
			}
			// The loss goes down, measured directly on fresh samples.
			before, after := evalLoss(s, make([]float32, s.params()), 200), evalLoss(s, res.weights, 200)
			if !(after < 0.7*before) {
				t.Errorf("loss %.4f before training, %.4f after %d rounds: want a clear decrease", before, after, s.rounds)
			}
			t.Logf("loss %.4f -> %.4f; at most %d objects in the stores", before, after, c.maxIDs)
		})
	}
}

func TestRunPrintsBothAndTheResult(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s := tinySetup()
	s.rounds = 4
	var out bytes.Buffer
	c, err := run(ctx, &out, s, 1, quietLog())
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"round   ours: loss", "\nours    d-ary", "\nnaive   naive-gather", "RESULT example=paramserver ours="} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if len(c.ours) != 1 || len(c.naive) != 1 || c.ours[0].samples != 4*2*8 || c.naive[0].samples != 4*2*8 {
		t.Errorf("comparison %+v", c)
	}
}

func TestSetupIsValidated(t *testing.T) {
	s := tinySetup()
	s.workers = 1
	if _, err := run(t.Context(), &bytes.Buffer{}, s, 1, quietLog()); err == nil {
		t.Error("a single worker was accepted")
	}
	s = tinySetup()
	s.active = s.features + 1
	if _, err := run(t.Context(), &bytes.Buffer{}, s, 1, quietLog()); err == nil {
		t.Error("more active features than features was accepted")
	}
}

// A context that is already over must make training fail, not hang or succeed.
func TestTrainHonoursDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := train(ctx, tinySetup(), false, quietLog()); err == nil {
		t.Fatal("training with a canceled context succeeded")
	}
}

// BenchmarkParamServer trains with the defaults of the command (4 MiB of
// weights, 8 workers, 1 Gbit/s links), ours and naive alternating, and
// reports both throughputs and their ratio.
func BenchmarkParamServer(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := defaultSetup()
	s.rounds = 10
	var ours, naive []result
	for b.Loop() {
		c, err := compare(ctx, s, 1, quietLog())
		if err != nil {
			b.Fatal(err)
		}
		ours, naive = append(ours, c.ours...), append(naive, c.naive...)
	}
	b.ReportMetric(rate(ours), "samples/s-ours")
	b.ReportMetric(rate(naive), "samples/s-naive")
	b.ReportMetric(rate(ours)/rate(naive), "ours/naive")
}
