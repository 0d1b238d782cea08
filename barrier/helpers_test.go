package barrier_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/testhooks"
)

func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return l
}

// barrierHooked is cfg with hook run before each message a barrier
// manager of its members receives (a hook that panics crashes that
// manager).
func barrierHooked(cfg cluster.Config, hook func(manager string, msg any)) cluster.Config {
	testhooks.In(&cfg).Barrier = hook
	return cfg
}

func startCluster(t testing.TB, nodes int) *cluster.Local {
	t.Helper()
	l, err := cluster.StartLocal(cluster.Config{Nodes: nodes, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

func deadline(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// events collects barrier events from the EventStream.
type events struct {
	mu       sync.Mutex
	failed   []*barrieractor.DeliveryFailed
	tookOver []*barrieractor.TookOver
	notify   chan struct{}
}

func watchEvents(t testing.TB, l *cluster.Local) *events {
	ev := &events{notify: make(chan struct{}, 1024)}
	sub := l.System().EventStream.Subscribe(func(e any) {
		ev.mu.Lock()
		defer ev.mu.Unlock()
		switch e := e.(type) {
		case *barrieractor.DeliveryFailed:
			ev.failed = append(ev.failed, e)
		case *barrieractor.TookOver:
			ev.tookOver = append(ev.tookOver, e)
		default:
			return
		}
		select {
		case ev.notify <- struct{}{}:
		default:
		}
	})
	t.Cleanup(func() { l.System().EventStream.Unsubscribe(sub) })
	return ev
}

// waitFor waits (on event notifications) until cond holds.
func (ev *events) waitFor(ctx context.Context, t testing.TB, what string, cond func(*events) bool) {
	t.Helper()
	for {
		ev.mu.Lock()
		ok := cond(ev)
		ev.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ev.notify:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// eventually polls cond (for state only a query shows) until it holds.
func eventually(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}
