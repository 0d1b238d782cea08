package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{"with respawn at the knee:", "respawning outstanding tasks", "(copy)", "waiting for the stragglers:",
		"(straggler)", "all 18 map tasks passed the barrier", "speedup from respawning at the knee"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

func startCluster(t testing.TB, nodes int) *cluster.Local {
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	l, err := cluster.StartLocal(cluster.Config{Nodes: nodes, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

// Respawning at the knee finishes the map phase before the stragglers'
// own attempts do; waiting needs all of them. Judged by the order of
// events (which attempts finished before every task passed), not by time.
func TestRespawnAtTheKneeBeatsTheStragglers(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	l := startCluster(t, 6)
	want := fmt.Sprint(expected(defaultSetup(true)))

	fast, err := mapReduce(ctx, l, io.Discard, defaultSetup(true), "respawn")
	if err != nil {
		t.Fatal(err)
	}
	slow, err := mapReduce(ctx, l, io.Discard, defaultSetup(false), "wait")
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]report{"respawn": fast, "wait": slow} {
		if fmt.Sprint(r.counts) != want {
			t.Errorf("%s: counts %v, want %v", name, r.counts, want)
		}
		if r.slowTasks != 6 {
			t.Errorf("%s: %d tasks on stragglers, want 6", name, r.slowTasks)
		}
	}
	if slow.stragglersBeforeDone != slow.slowTasks || slow.respawned != 0 {
		t.Errorf("waiting run: %+v: it must wait for every straggler", slow)
	}
	if fast.slowdownAt < 9 || fast.respawned == 0 || fast.wonByCopies == 0 {
		t.Errorf("respawn run: %+v: want the slowdown seen after half the tasks, and copies that won", fast)
	}
	if fast.stragglersBeforeDone >= fast.slowTasks {
		t.Errorf("respawn run: %+v: it waited for all the stragglers anyway", fast)
	}
	// Every task passed exactly once: the copies and the originals that
	// won add up to the tasks.
	if fast.wonByCopies > fast.respawned {
		t.Errorf("respawn run: %+v", fast)
	}
}

// A context that is already over must make run fail, not hang or succeed.
func TestRunHonoursDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err == nil {
		t.Fatalf("run with a canceled context succeeded:\n%s", out.String())
	}
}

// BenchmarkKneeRespawn reports the map phase's completion time with and
// without respawning at the knee, and their ratio (speedup).
func BenchmarkKneeRespawn(b *testing.B) {
	l := startCluster(b, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var with, without time.Duration
	for i := 0; i < b.N; i++ {
		r, err := mapReduce(ctx, l, io.Discard, defaultSetup(true), fmt.Sprintf("respawn-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		w, err := mapReduce(ctx, l, io.Discard, defaultSetup(false), fmt.Sprintf("wait-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		with += r.elapsed
		without += w.elapsed
	}
	b.ReportMetric(float64(with.Milliseconds())/float64(b.N), "ms-respawn")
	b.ReportMetric(float64(without.Milliseconds())/float64(b.N), "ms-wait")
	b.ReportMetric(float64(without)/float64(with), "speedup")
}
