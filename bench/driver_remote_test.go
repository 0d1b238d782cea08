package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// TestDriverHoldsNoPreallocatedQueuePerPeer: the driver writes to every
// node of every system it runs, and what it holds for each must not be
// Proto.Actor's default million-slot queue (16 MiB a peer), which made a
// 1 KiB comparison's driver a 256 MiB heap whose collection took the
// members' CPUs in the middle of their repetitions.
func TestDriverHoldsNoPreallocatedQueuePerPeer(t *testing.T) {
	const peers = 4
	driver, err := startDriver(driverRemote("127.0.0.1", 0), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(driver.Shutdown)
	var pids []*actor.PID
	for i := range peers {
		sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.NewTextHandler(io.Discard, nil))
		}))
		remote.NewRemote(sys, cluster.RemoteConfig("127.0.0.1", 0, nil, nil)).Start()
		t.Cleanup(sys.Shutdown)
		pid, err := sys.Root.SpawnNamed(actor.PropsFromFunc(func(c actor.Context) {
			if _, ok := c.Message().(*messages.BenchEcho); ok {
				c.Respond(&messages.BenchEchoReply{})
			}
		}), fmt.Sprintf("echo-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	before := liveHeap()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pid := range pids {
		// A request opens the driver's endpoint writer to that peer.
		if _, err := driver.Root.RequestFuture(pid, &messages.BenchEcho{}, time.Until(deadlineOf(ctx))).Result(); err != nil {
			t.Fatalf("echo from %s: %v", pid, err)
		}
	}
	// The peers' systems are in this process too: what the driver's
	// endpoints hold is at most this growth. The default queues alone
	// would be 64 MiB.
	if grew := liveHeap() - before; grew > 16<<20 {
		t.Errorf("the heap grew by %d MiB for the driver's endpoints to %d peers; want a few MiB at most", grew>>20, peers)
	}
}

// liveHeap is the heap's live bytes after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
