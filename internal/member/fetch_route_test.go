package member

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// routeCounts counts, over a run, the Locates the directory shards
// received, the Locate ends the store nodes took as their Locator's
// result (fetchLocated), and the Locate answers that reached a store
// node as actor messages. Quick counts the Locates the shards answered
// without their actors (from their tables' published inline objects).
type routeCounts struct {
	mu                               sync.Mutex
	shardLocates, ends, actorAnswers int
	other                            map[string]int
	quick                            func() int
}

// locates is every Locate the shards answered.
func (r *routeCounts) locates() int { return r.shardLocates + r.quick() }

func (r *routeCounts) shard(_ string, msg any) {
	if _, ok := msg.(*messages.Locate); ok {
		r.mu.Lock()
		r.shardLocates++
		r.mu.Unlock()
	}
}

func (r *routeCounts) store(_ string, msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch t := fmt.Sprintf("%T", msg); t {
	case "*storeactor.fetchLocated", "*storeactor.fastRun":
		// A fast Get hands its run and its Locate's end to the node in
		// one message.
		r.ends++
	case "*messages.LocateReply":
		r.actorAnswers++
	}
}

// routes names the ways the run's Locates went and came back, with how
// many took each.
func (r *routeCounts) routes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	if r.ends > 0 {
		out["the store node's Locator call, answered by its result"] = r.ends
	}
	if n := r.locates() - r.ends; n > 0 {
		out["another sender than the store node's Locator"] = n
	}
	if r.actorAnswers > 0 {
		out["an answer as an actor message to the store node"] = r.actorAnswers
	}
	return out
}

// A Get's fetch has one route, whatever the Get: its Locate leaves
// through the store node's Locator and its answer comes back as that
// call's result, for an inline object or a streamed one, a shard on the
// Get's member or on another, a Locate that waits for the object's
// creation, and a GetInto. The scripted run counts, at the shards and at
// the store nodes, the routes its Locates took.
func TestGetTakesOneRoute(t *testing.T) {
	quick0 := shardactor.QuickLocates()
	rc := routeCounts{quick: func() int { return int(shardactor.QuickLocates() - quick0) }}
	l := start(t, Config{Nodes: 3, hooks: testhooks.Set{Shard: rc.shard, Store: storeactor.Hooks{BeforeReceive: rc.store}}})
	ctx := deadline(t, 30*time.Second)
	type get struct {
		name        string
		size        int
		shard, from int  // the shard's member, the getter's
		into, later bool // GetInto; Put after the Get started
	}
	gets := []get{
		{"inline-remote", 1 << 10, 1, 2, false, false},
		{"inline-local", 1 << 10, 2, 2, false, false},
		{"streamed-remote", 1 << 20, 1, 2, false, false},
		{"streamed-local", 1 << 20, 2, 2, false, false},
		{"waiting-remote", 1 << 10, 1, 2, false, true},
		{"waiting-streamed", 1 << 20, 1, 2, false, true},
		{"into-remote", 1 << 20, 1, 2, true, false},
		{"into-inline-local", 1 << 10, 2, 2, true, false},
	}
	for i, g := range gets {
		id := idOnNode(g.name, g.shard, 3, 3)
		data := testutil.Pattern(byte(i), g.size)
		put := func() error { return l.Client(0).Put(ctx, id, data) }
		if !g.later {
			if err := put(); err != nil {
				t.Fatal(err)
			}
		}
		got := make(chan error, 1)
		go func() {
			var b []byte
			var err error
			if g.into {
				b = make([]byte, g.size)
				var n int
				n, err = l.Client(g.from).GetInto(ctx, id, b)
				b = b[:n]
			} else {
				b, err = l.Client(g.from).Get(ctx, id)
			}
			if err == nil && !bytes.Equal(b, data) {
				err = errors.New("other bytes")
			}
			got <- err
		}()
		if g.later {
			eventually(t, 10*time.Second, "the Get's Locate waits at the shard", func() bool {
				rc.mu.Lock()
				defer rc.mu.Unlock()
				return rc.locates() > rc.ends
			})
			if err := put(); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-got; err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
	}
	// Every Get ends only after its Locate's answer came: the counts are
	// final.
	routes := rc.routes()
	if len(routes) != 1 {
		t.Fatalf("the Gets took %d routes, want 1: %v", len(routes), routes)
	}
	if rc.ends < len(gets) {
		t.Fatalf("%d Locates for %d Gets", rc.ends, len(gets))
	}
}
