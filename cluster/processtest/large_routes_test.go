package processtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/messages"
)

// largeSizes are the object sizes the large-object tests move through
// every route: 300 MiB (past the 256 MiB one remote message carries),
// 1 GiB too with HOPLITE_LARGE=1 (1 GiB more of memory per copy). Under
// -race they move 48 MiB, many chunks, through the same routes: the race
// detector checks every word a copy moves, which was three quarters of
// the 300 MiB run's minute. scripts/test runs these tests again without
// it, at 300 MiB.
func largeSizes() []int64 {
	switch {
	case os.Getenv("HOPLITE_LARGE") == "1":
		return []int64{300 << 20, 1 << 30}
	case raceEnabled:
		return []int64{48 << 20}
	}
	return []int64{300 << 20}
}

// remoteMessageBound is the most one message on the actors' remote
// carries (the member's maxRemoteMessage): a remote actor's Put or Get of
// more is refused, naming the routes that take it.
const remoteMessageBound = 256 << 20

// fingerprintWriter fingerprints what is written to it, and counts it:
// a test compares an object's bytes without holding a second copy.
type fingerprintWriter struct {
	fp fingerprint.Writer
	n  int64
}

func (w *fingerprintWriter) Write(p []byte) (int, error) {
	w.fp.Write(p)
	w.n += int64(len(p))
	return len(p), nil
}

// patternFingerprint is the fingerprint of the pattern seed draws for
// size bytes.
func patternFingerprint(seed uint64, size int64) uint64 {
	var w fingerprintWriter
	_, _ = io.CopyBuffer(&w, &patternReader{seed: seed, size: size}, make([]byte, 4<<20))
	return w.fp.Sum()
}

// patternBytes is the pattern seed draws for size bytes, whole.
func patternBytes(seed uint64, size int64) []byte {
	b := make([]byte, size)
	_, _ = io.ReadFull(&patternReader{seed: seed, size: size}, b)
	return b
}

// wantBytes fails t unless got is the pattern of want's fingerprint.
func wantBytes(t *testing.T, route string, got []byte, size int64, want uint64) {
	t.Helper()
	if int64(len(got)) != size || fingerprint.Of(got) != want {
		t.Fatalf("%s: %d bytes of %d, fingerprint %x, want %x", route, len(got), size, fingerprint.Of(got), want)
	}
}

// wantWritten fails t unless w got the pattern of want's fingerprint.
func wantWritten(t *testing.T, route string, w *fingerprintWriter, size int64, want uint64) {
	t.Helper()
	if w.n != size || w.fp.Sum() != want {
		t.Fatalf("%s: %d bytes of %d written, fingerprint %x, want %x", route, w.n, size, w.fp.Sum(), want)
	}
}

// actorRequest sends msg to target from an actor spawned in system and
// returns the reply it receives.
func actorRequest(t *testing.T, system *actor.ActorSystem, target *actor.PID, msg any, within time.Duration) any {
	t.Helper()
	replies := make(chan any, 1)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Request(target, msg)
		case *messages.PutReply, *messages.GetReply, *messages.DeleteReply:
			replies <- m
		}
	}))
	defer system.Root.Stop(pid)
	select {
	case r := <-replies:
		return r
	case <-time.After(within):
		t.Fatalf("%T to %s: no reply in %v", msg, target, within)
		return nil
	}
}

// actorCall runs call from an actor spawned for it in system, as an
// application actor uses a client: on a goroutine of its own, the
// result sent to the actor as a message.
func actorCall(t *testing.T, system *actor.ActorSystem, call func() ([]byte, error), within time.Duration) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	results := make(chan result, 1)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			self, sys := c.Self(), c.ActorSystem()
			go func() {
				data, err := call()
				sys.Root.Send(self, &result{data, err})
			}()
		case *result:
			results <- *m
		}
	}))
	defer system.Root.Stop(pid)
	select {
	case r := <-results:
		return r.data, r.err
	case <-time.After(within):
		t.Fatalf("an actor's call: no result in %v", within)
		return nil, nil
	}
}

// TestLargeObjectsEmbedded: objects of largeSizes (300 MiB, 48 MiB under
// -race) Put and Get on an embedded cluster through each route
// of its process, each read on the other member, exact: application
// actors in the members' own actor systems (a Put by reference, a Get
// read-only), a member's storenode.Client (Put, Get, GetInto, GetTo),
// and PutFrom of a reader of unknown length.
func TestLargeObjectsEmbedded(t *testing.T) {
	for _, size := range largeSizes() {
		t.Run(fmt.Sprintf("%dMiB", size>>20), func(t *testing.T) {
			l, err := cluster.StartLocal(cluster.Config{Nodes: 2, Capacity: 2*size + 64<<20, DefaultTimeout: 5 * time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer l.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			const seed = 41
			want := patternFingerprint(seed, size)
			data := patternBytes(seed, size)

			// Application actors in the members' own systems.
			m0, m1 := l.Member(0), l.Member(1)
			r := actorRequest(t, m0.System(), m0.StoreNode(), &messages.Put{ObjectId: "by-actor", Data: data, TimeoutMs: 300_000}, 5*time.Minute)
			if err := r.(*messages.PutReply).GetError().Err(); err != nil {
				t.Fatalf("actor Put: %v", err)
			}
			r = actorRequest(t, m1.System(), m1.StoreNode(), &messages.Get{ObjectId: "by-actor", ReadOnly: true, TimeoutMs: 300_000}, 5*time.Minute)
			if err := r.(*messages.GetReply).GetError().Err(); err != nil {
				t.Fatalf("actor Get on the other member: %v", err)
			}
			wantBytes(t, "actor Get on the other member", r.(*messages.GetReply).GetData(), size, want)
			r = nil
			if err := l.Client(0).Delete(ctx, "by-actor"); err != nil {
				t.Fatal(err)
			}

			// A member's Client.
			if err := l.Client(0).Put(ctx, "by-client", data); err != nil {
				t.Fatalf("Client.Put: %v", err)
			}
			got, err := l.Client(1).Get(ctx, "by-client")
			if err != nil {
				t.Fatalf("Client.Get on the other member: %v", err)
			}
			wantBytes(t, "Client.Get on the other member", got, size, want)
			got = nil
			var w fingerprintWriter
			if _, err := l.Client(1).GetTo(ctx, "by-client", &w); err != nil {
				t.Fatalf("Client.GetTo: %v", err)
			}
			wantWritten(t, "Client.GetTo", &w, size, want)
			clear(data)
			n, err := l.Client(1).GetInto(ctx, "by-client", data)
			if err != nil {
				t.Fatalf("Client.GetInto: %v", err)
			}
			wantBytes(t, "Client.GetInto", data[:n], size, want)
			data = nil
			if err := l.Client(0).Delete(ctx, "by-client"); err != nil {
				t.Fatal(err)
			}

			// A reader of unknown length.
			if err := l.Client(0).PutFrom(ctx, "by-reader", &patternReader{seed: seed, size: size}, -1); err != nil {
				t.Fatalf("Client.PutFrom of unknown length: %v", err)
			}
			w = fingerprintWriter{}
			if _, err := l.Client(1).GetTo(ctx, "by-reader", &w); err != nil {
				t.Fatalf("Client.GetTo of the PutFrom: %v", err)
			}
			wantWritten(t, "Client.GetTo of the PutFrom", &w, size, want)
		})
	}
}

// TestLargeObjectsProcesses: objects of largeSizes (300 MiB, 48 MiB under
// -race) Put and Get on two `hoplite node` processes through
// each route from outside them, each read through the other member,
// exact: a Dial client (storenode.Client on the data plane: Put, Get,
// GetInto, PutFrom of unknown length, GetTo), the CLI (put from a pipe,
// get to a pipe), and an application actor in another process: its
// messages.Put and Get, whose bytes would ride in one remote message
// each, are answered INVALID_ARGUMENT past what one carries, naming the
// limit and the routes to use instead, and its Put and Get through a
// Dial client made from its actor system (cluster.WithActorSystem)
// complete.
func TestLargeObjectsProcesses(t *testing.T) {
	t.Parallel()
	for _, size := range largeSizes() {
		t.Run(fmt.Sprintf("%dMiB", size>>20), func(t *testing.T) {
			bin := hopliteBinary(t)
			slots, seeds := memberSlots(t, 2)
			capacity := fmt.Sprintf("%dMiB", (2*size+64<<20)>>20)
			var nodes []*nodeProc
			for i := range 2 {
				nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-capacity", capacity))
			}
			for _, n := range nodes {
				n.waitStarted(t, 60*time.Second)
			}
			tc := newTestClient(t)
			tc.converge(t, nodes...)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			c0, err := cluster.Dial(ctx, nodes[0].address)
			if err != nil {
				t.Fatal(err)
			}
			defer c0.Close()
			c1, err := cluster.Dial(ctx, nodes[1].address)
			if err != nil {
				t.Fatal(err)
			}
			defer c1.Close()
			const seed = 43
			want := patternFingerprint(seed, size)

			// The Dial client.
			data := patternBytes(seed, size)
			if err := c0.Put(ctx, "dial", data); err != nil {
				t.Fatalf("Dial Put: %v", err)
			}
			got, err := c1.Get(ctx, "dial")
			if err != nil {
				t.Fatalf("Dial Get through the other member: %v", err)
			}
			wantBytes(t, "Dial Get", got, size, want)
			got = nil
			clear(data)
			n, err := c1.GetInto(ctx, "dial", data)
			if err != nil {
				t.Fatalf("Dial GetInto: %v", err)
			}
			wantBytes(t, "Dial GetInto", data[:n], size, want)

			// An actor in another process: one remote message each way,
			// refused past what one carries.
			if size > remoteMessageBound {
				r := actorRequest(t, tc.system, nodes[0].store(), &messages.Put{ObjectId: "remote-actor", Data: data, TimeoutMs: 60_000}, 2*time.Minute)
				if err := r.(*messages.PutReply).GetError().Err(); !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "cluster.Dial") {
					t.Fatalf("a remote actor's Put of %d bytes: %v, want INVALID_ARGUMENT naming the routes", size, err)
				}
				r = actorRequest(t, tc.system, nodes[1].store(), &messages.Get{ObjectId: "dial", TimeoutMs: 60_000}, 2*time.Minute)
				if err := r.(*messages.GetReply).GetError().Err(); !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "Member.Spawn") {
					t.Fatalf("a remote actor's Get of %d bytes: %v, want INVALID_ARGUMENT naming the routes", size, err)
				}
			}
			data = nil
			// The same actor system through a Dial client made from it
			// (cluster.WithActorSystem): the bytes on the data plane, an
			// actor making the calls on a goroutine of its own.
			ca, err := cluster.Dial(ctx, nodes[0].address, cluster.WithActorSystem(tc.system))
			if err != nil {
				t.Fatal(err)
			}
			defer ca.Close()
			if _, err := actorCall(t, tc.system, func() ([]byte, error) {
				return nil, ca.Put(ctx, "remote-actor", patternBytes(seed, size))
			}, 5*time.Minute); err != nil {
				t.Fatalf("a remote actor's Put of %d bytes through a Dial client of its system: %v", size, err)
			}
			got, err = actorCall(t, tc.system, func() ([]byte, error) { return ca.Get(ctx, "dial") }, 5*time.Minute)
			if err != nil {
				t.Fatalf("a remote actor's Get of %d bytes through a Dial client of its system: %v", size, err)
			}
			wantBytes(t, "a remote actor's Get through a Dial client of its system", got, size, want)
			got = nil
			w := fingerprintWriter{}
			if _, err := c1.GetTo(ctx, "remote-actor", &w); err != nil {
				t.Fatalf("the remote actor's Put, read through the other member: %v", err)
			}
			wantWritten(t, "the remote actor's Put", &w, size, want)
			for _, id := range []string{"dial", "remote-actor"} {
				if err := c0.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
			}

			// A reader of unknown length, and a writer.
			if err := c0.PutFrom(ctx, "stream", &patternReader{seed: seed, size: size}, -1); err != nil {
				t.Fatalf("Dial PutFrom of unknown length: %v", err)
			}
			w = fingerprintWriter{}
			if _, err := c1.GetTo(ctx, "stream", &w); err != nil {
				t.Fatalf("Dial GetTo through the other member: %v", err)
			}
			wantWritten(t, "Dial GetTo", &w, size, want)
			if err := c0.Delete(ctx, "stream"); err != nil {
				t.Fatal(err)
			}

			// The CLI, through pipes.
			put := exec.CommandContext(ctx, bin, "put", "--addr="+nodes[1].address, "--timeout", "10m", "cli")
			put.Stdin = &patternReader{seed: seed, size: size}
			if out, err := put.CombinedOutput(); err != nil || !strings.Contains(string(out), fmt.Sprintf("put cli (%d bytes)", size)) {
				t.Fatalf("hoplite put from a pipe: %v\n%s", err, out)
			}
			w = fingerprintWriter{}
			get := exec.CommandContext(ctx, bin, "get", "--addr="+nodes[0].address, "--timeout", "10m", "cli")
			var errs strings.Builder
			get.Stdout, get.Stderr = &w, &errs
			if err := get.Run(); err != nil {
				t.Fatalf("hoplite get to a pipe: %v\n%s", err, errs.String())
			}
			wantWritten(t, "hoplite get", &w, size, want)
		})
	}
}
