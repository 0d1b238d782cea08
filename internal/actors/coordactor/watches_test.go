package coordactor

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// watchCountingStore is a fakeStore seen through a Process that counts
// the Watch and Unwatch system messages it gets; with remote it stands
// at another member's address, as the registry resolves one.
type watchCountingStore struct {
	system             *actor.ActorSystem
	inner              *actor.PID
	watches, unwatches atomic.Int32
}

func (s *watchCountingStore) SendUserMessage(_ *actor.PID, message any) {
	p, _ := s.system.ProcessRegistry.Get(s.inner)
	p.SendUserMessage(s.inner, message)
}

func (s *watchCountingStore) SendSystemMessage(_ *actor.PID, message any) {
	switch message.(type) {
	case *actor.Watch:
		s.watches.Add(1)
	case *actor.Unwatch:
		s.unwatches.Add(1)
	}
}

func (*watchCountingStore) Stop(*actor.PID) {}

// reduceWithCountedWatches runs a Reduce of three sources over
// watch-counting store nodes (on another member with remote) until the
// coordinator stops, and returns the nodes.
func reduceWithCountedWatches(t *testing.T, remote bool) []*watchCountingStore {
	t.Helper()
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	const sources = 3
	releases := make(chan release, 16)
	holders := map[string]*messages.NodeRef{}
	var stores []*watchCountingStore
	var ids []string
	for i := range sources {
		name := fmt.Sprintf("n%d", i)
		inner := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
			return &fakeStore{name: name, releases: releases}
		}))
		s := &watchCountingStore{system: system, inner: inner}
		stores = append(stores, s)
		id := "store-" + name
		pid, ok := system.ProcessRegistry.Add(s, id)
		if !ok {
			t.Fatal("store not registered")
		}
		if remote {
			pid = actor.NewPID("far:1", id)
		}
		ids = append(ids, fmt.Sprintf("src-%d", i))
		holders[ids[i]] = &messages.NodeRef{NodeId: name, Address: pid.GetAddress(), ActorId: pid.GetId()}
	}
	if remote {
		system.ProcessRegistry.RegisterAddressResolver(func(p *actor.PID) (actor.Process, bool) {
			if p.GetAddress() != "far:1" {
				return nil, false
			}
			return system.ProcessRegistry.GetLocal(p.GetId())
		})
	}
	stopped := make(chan struct{})
	spawnSumReduce(t, system, ActorConfig{Reduce: reduction.Config{ForceDegree: 1, InlineLimit: 64 << 10}, Estimator: estimator.New(100*time.Microsecond, 0)},
		holders, ids, func() { close(stopped) })
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the coordinator did not stop")
	}
	return stores
}

// A coordinator unwatches every node it watched once it stopped: a
// watch outlives its watcher otherwise, one entry per Reduce at every
// participant's store node.
func TestCoordinatorUnwatchesItsNodesWhenItStops(t *testing.T) {
	for _, remote := range []bool{false, true} {
		t.Run(fmt.Sprintf("remote=%v", remote), func(t *testing.T) {
			stores := reduceWithCountedWatches(t, remote)
			watched := 0
			for _, s := range stores {
				watched += int(s.watches.Load())
			}
			if watched == 0 {
				t.Fatal("the coordinator watched no node")
			}
			for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				unwatched := 0
				for _, s := range stores {
					unwatched += int(s.unwatches.Load())
				}
				if unwatched == watched {
					break
				}
				if time.Now().After(end) {
					t.Fatalf("%d watches and %d unwatches 10 s after the coordinator stopped; want as many", watched, unwatched)
				}
			}
			for i, s := range stores {
				if w, u := s.watches.Load(), s.unwatches.Load(); w != u {
					t.Errorf("node %d: %d watches and %d unwatches", i, w, u)
				}
			}
		})
	}
}
