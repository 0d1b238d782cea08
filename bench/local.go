package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
)

// localBackend is the embedded cluster with an emulated link per node.
type localBackend struct {
	l        *cluster.Local
	mu       sync.Mutex
	prepared map[string][]byte
}

func openLocal(o *Options, sys system, log *logrus.Logger) (*localBackend, error) {
	cfg := cluster.Config{Nodes: o.Nodes, LinkBandwidth: o.Bandwidth.BytesPerSecond(), ChunkSize: o.ChunkSize, Capacity: o.capacity(),
		DefaultTimeout: o.OpTimeout, Log: log}
	*experiments.In(&cfg) = sys.exp
	l, err := cluster.StartLocal(cfg)
	if err != nil {
		return nil, err
	}
	return &localBackend{l: l, prepared: map[string][]byte{}}, nil
}

func (b *localBackend) Prepare(_ context.Context, _ int, d DataSpec) error {
	data := Generate(d)
	b.mu.Lock()
	b.prepared[d.ID] = data
	b.mu.Unlock()
	return nil
}

func (b *localBackend) Put(ctx context.Context, host int, id string, at time.Time) (time.Time, error) {
	b.mu.Lock()
	data, ok := b.prepared[id]
	delete(b.prepared, id)
	b.mu.Unlock()
	if !ok {
		return time.Time{}, fmt.Errorf("put %s: not prepared", id)
	}
	if err := sleepUntil(ctx, at); err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	if err := b.l.Client(host).Put(ctx, id, data); err != nil {
		return time.Time{}, fmt.Errorf("put %s on host %d: %w", id, host, err)
	}
	return start, nil
}

func (b *localBackend) Fetch(ctx context.Context, host int, id string, at time.Time) (timing, error) {
	s, err := timed(ctx, at, func() error { return prefetch(ctx, b.l.System().Root, b.l.StoreNode(host), id) })
	if err != nil {
		return s, fmt.Errorf("get %s on host %d: %w", id, host, err)
	}
	return s, nil
}

func (b *localBackend) Reduce(ctx context.Context, host int, target string, sources []string, num int, all bool, at time.Time) (*messages.ReduceReply, timing, error) {
	c := b.l.Client(host)
	var r *messages.ReduceReply
	s, err := timed(ctx, at, func() (err error) {
		if all {
			r, err = c.AllReduce(ctx, target, sources, num, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		} else {
			r, err = c.Reduce(ctx, target, sources, num, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		}
		return err
	})
	return r, s, err
}

func (b *localBackend) Verify(ctx context.Context, host int, id string, srcs []DataSpec) error {
	got, err := b.l.Client(host).GetReadOnly(ctx, id)
	if err != nil {
		return fmt.Errorf("verify %s on host %d: %w", id, host, err)
	}
	return Check(id, got, srcs)
}

func (b *localBackend) Delete(ctx context.Context, ids []string) {
	for _, id := range ids {
		for h := 0; h < b.l.Nodes(); h++ {
			if b.l.Alive(h) {
				_ = b.l.Client(h).Delete(ctx, id)
				break
			}
		}
	}
}

// RoundTrips is not measured in process: the members share one process,
// and there are no bench agents.
func (b *localBackend) RoundTrips(context.Context, int, []int, time.Time, bool) (timing, error) {
	return timing{}, errors.New("needs --testbed")
}

// CPU is the whole process's: the embedded cluster's members share it
// with the driver.
func (b *localBackend) CPU(context.Context) (time.Duration, error) { return processCPU() }

func (b *localBackend) Kill(host int) error { return b.l.Kill(host) }

func (b *localBackend) TargetID(_ context.Context, prefix string) (string, error) {
	// StartLocal places shard j on node j mod Nodes, with Nodes shards.
	for n := 0; n < 1<<20; n++ {
		if id := fmt.Sprintf("%s-%d", prefix, n); directory.ShardIndex(id, b.l.Nodes()) == 0 {
			return id, nil
		}
	}
	return "", fmt.Errorf("no id with prefix %s falls on node 0's shard", prefix)
}

func (b *localBackend) Close() { b.l.Stop() }
