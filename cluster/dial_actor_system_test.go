package cluster

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// A client dialed from an application's actor system (WithActorSystem)
// moves an object's bytes on the data plane: with the system's remote
// messages capped at 1 MiB, a raw messages.Put of 4 MiB from it is
// refused INVALID_ARGUMENT, while the client's Put, Get and GetInto of
// the same 4 MiB, and an actor's through it, return the exact bytes.
// Close leaves the system running.
func TestDialWithActorSystem(t *testing.T) {
	ms := joinMembers(t, 2, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	app := actor.NewActorSystem()
	rc := RemoteConfig("127.0.0.1", 0, nil, nil)
	remote.WithMaxMessageSize(1 << 20)(rc)
	r := remote.NewRemote(app, rc)
	if err := startRemote(r); err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(true)

	if _, err := Dial(ctx, ms[0].Address(), WithActorSystem(actor.NewActorSystem())); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("Dial from a system without a remote: %v, want INVALID_ARGUMENT", err)
	}
	c, err := Dial(ctx, ms[0].Address(), WithActorSystem(app))
	if err != nil {
		t.Fatal(err)
	}
	want := randomBytes(11, 4<<20+3)
	res, err := actorutil.Request(ctx, app.Root, c.PID(), &messages.Put{ObjectId: "raw", Data: want, TimeoutMs: 10000})
	if err == nil {
		err = messages.ErrOrNil(res.(*messages.PutReply).GetError())
	}
	if !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("a raw Put of 4 MiB through a remote capped at 1 MiB: %v, want INVALID_ARGUMENT (else the test shows nothing)", err)
	}

	if err := c.Put(ctx, "x", want); err != nil {
		t.Fatalf("Put: %v", err)
	}
	got, err := c.Get(ctx, "x")
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get: %d bytes, %v; want the %d Put", len(got), err, len(want))
	}
	dst := make([]byte, len(want)+10)
	if n, err := c.GetInto(ctx, "x", dst); err != nil || !bytes.Equal(dst[:n], want) {
		t.Fatalf("GetInto: %d bytes, %v", n, err)
	}

	// An actor of the application's uses the client from a goroutine
	// and sends itself the result.
	type got1 struct {
		data []byte
		err  error
	}
	results := make(chan got1, 1)
	pid := app.Root.Spawn(actor.PropsFromFunc(func(a actor.Context) {
		switch m := a.Message().(type) {
		case *actor.Started:
			self, system := a.Self(), a.ActorSystem()
			go func() {
				b, err := c.Get(ctx, "x")
				system.Root.Send(self, &got1{b, err})
			}()
		case *got1:
			results <- *m
		}
	}))
	defer app.Root.Stop(pid)
	select {
	case g := <-results:
		if g.err != nil || !bytes.Equal(g.data, want) {
			t.Fatalf("the actor's Get: %d bytes, %v", len(g.data), g.err)
		}
	case <-ctx.Done():
		t.Fatal("the actor's Get never answered")
	}

	c.Close()
	if _, err := Hello(ctx, app.Root, ms[1].Address()); err != nil {
		t.Fatalf("the application's system after Close: %v", err)
	}
}
