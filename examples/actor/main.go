// Command actor runs an application actor in a member's own actor
// system, where a message to the member's store node is a pointer
// hand-off: it Gets an object that another member Puts, and waits for it.
package main

import (
	"fmt"
	"log"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// reader Gets one object from its member's store node and reports it.
type reader struct {
	store *actor.PID
	done  chan<- string
}

func (r *reader) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// Request, not Send: the GetReply comes back to this actor. The
		// Get waits up to TimeoutMs (an int64 of milliseconds) for the
		// object to exist.
		ctx.Request(r.store, &messages.Get{ObjectId: "greeting", TimeoutMs: 10_000})
	case *messages.GetReply:
		if err := m.Err(); err != nil { // nil on success
			r.done <- "error: " + err.Error()
			return
		}
		r.done <- string(m.GetData())
	}
}

func main() {
	l, err := cluster.StartLocal(cluster.Config{Nodes: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Stop()
	done := make(chan string, 1)
	// In member 2's own actor system, beside its store node.
	m := l.Member(2)
	m.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &reader{store: m.StoreNode(), done: done} // waits for the object
	}))
	// Member 0 creates it.
	creator := l.Member(0)
	creator.System().Root.Send(creator.StoreNode(), &messages.Put{ObjectId: "greeting", Data: []byte("hello"), TimeoutMs: 10_000})
	select {
	case s := <-done:
		fmt.Println(s)
	case <-time.After(15 * time.Second):
		fmt.Println("no reply")
	}
}
