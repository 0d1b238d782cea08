package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/experiments"
)

func quietLog() *logrus.Logger {
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	return log
}

// tinySetup: 256 KiB batches (above the inline limit, so they move in 32
// KiB chunks through a broadcast tree), 4 models (ties happen), two
// queries in flight, at memory speed.
func tinySetup() setup {
	return setup{models: 4, images: 16, pixels: 4096, view: 64, classes: 4, spread: 0.3, queries: 6,
		inflight: 2, compute: time.Millisecond, chunk: 32 << 10, pool: 3, seed: 3}
}

// direct computes every query's answer without the store: each model
// classifies the batch itself, then the majority.
func direct(s setup) (answers [][]byte, disagreements, overruled int) {
	models, pool := ensemble(s), batches(s)
	for k := range s.queries {
		var votes [][]byte
		for _, md := range models {
			votes = append(votes, md.classify(s, pool[k%len(pool)]))
		}
		a := majority(s, votes)
		for img := range s.images {
			for _, v := range votes[1:] {
				if v[img] != votes[0][img] {
					disagreements++
					break
				}
			}
			if a[img] != votes[0][img] {
				overruled++
			}
		}
		answers = append(answers, a)
	}
	return answers, disagreements, overruled
}

func TestMajority(t *testing.T) {
	s := setup{images: 4, classes: 3}
	votes := [][]byte{{0, 1, 2, 2}, {1, 1, 0, 2}, {1, 0, 1, 0}}
	// image 0: 1 wins 2:1; image 1: 1 wins; image 2: a three-way tie goes
	// to class 0; image 3: 2 wins.
	if got, want := majority(s, votes), []byte{1, 1, 0, 2}; !bytes.Equal(got, want) {
		t.Errorf("majority %v, want %v", got, want)
	}
}

func TestServingAnswersTheEnsemblesMajority(t *testing.T) {
	s := tinySetup()
	want, disagreements, overruled := direct(s)
	// The check below means something only if the models disagree and the
	// majority is not simply one model's vote.
	if disagreements == 0 || overruled == 0 {
		t.Fatalf("degenerate ensemble: %d images with disagreement, %d where model 0 is overruled", disagreements, overruled)
	}
	pool := batches(s)
	for _, naive := range []bool{false, true} {
		t.Run(fmt.Sprintf("naive=%v", naive), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			cfg := cluster.Config{Nodes: s.models + 1, ChunkSize: s.chunk, Log: quietLog()}
			experiments.In(&cfg).Naive = naive
			l, err := cluster.StartLocal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Stop()
			res, err := serveOn(ctx, l, s, pool)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.answers) != s.queries {
				t.Fatalf("%d answers, want %d", len(res.answers), s.queries)
			}
			for k, a := range res.answers {
				if !bytes.Equal(a, want[k]) {
					t.Errorf("query %d: answered %v, the models' majority is %v", k, a, want[k])
				}
				if res.latencies[k] <= 0 {
					t.Errorf("query %d: no latency recorded", k)
				}
			}
			// Every query's batch and votes were deleted: the stores empty
			// out (the copies are dropped after the Delete's reply).
			deadline := time.Now().Add(10 * time.Second)
			for {
				var left []string
				for i := range l.Nodes() {
					for _, id := range l.Objects(i) {
						left = append(left, fmt.Sprintf("%s@node-%d", id, i))
					}
				}
				if len(left) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("objects left in the stores after the run: %v", left)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestRunPrintsBothAndTheResult(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	s := tinySetup()
	var out bytes.Buffer
	c, err := run(ctx, &out, s, 1, quietLog())
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"\nours       1        6", "\nnaive      1        6", "both answered every query alike",
		"RESULT example=serving ours="} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	want, _, _ := direct(s)
	if len(c.ours) != 1 || !slices.EqualFunc(c.ours[0].answers, want, bytes.Equal) {
		t.Errorf("ours answered %v, want %v", c.ours, want)
	}
}

func TestSetupIsValidated(t *testing.T) {
	for name, change := range map[string]func(*setup){
		"no models":        func(s *setup) { s.models = 0 },
		"too many classes": func(s *setup) { s.classes = 300 },
		"view too wide":    func(s *setup) { s.view = s.pixels + 1 },
		"nothing inflight": func(s *setup) { s.inflight = 0 },
	} {
		s := tinySetup()
		change(&s)
		if _, err := run(t.Context(), &bytes.Buffer{}, s, 1, quietLog()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A context that is already over must make serving fail, not hang or succeed.
func TestServeHonoursDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := tinySetup()
	if _, err := serve(ctx, s, batches(s), false, quietLog()); err == nil {
		t.Fatal("serving with a canceled context succeeded")
	}
}

// BenchmarkServing serves with the defaults of the command (4 MiB
// batches, 8 models, 1 Gbit/s links), ours and naive alternating, and
// reports both throughputs and their ratio.
func BenchmarkServing(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	s := defaultSetup()
	s.queries = 15
	var ours, naive []result
	for b.Loop() {
		c, err := compare(ctx, s, 1, quietLog())
		if err != nil {
			b.Fatal(err)
		}
		ours, naive = append(ours, c.ours...), append(naive, c.naive...)
	}
	b.ReportMetric(rate(ours), "queries/s-ours")
	b.ReportMetric(rate(naive), "queries/s-naive")
	b.ReportMetric(rate(ours)/rate(naive), "ours/naive")
}
