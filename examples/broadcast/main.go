// Command broadcast shows an application built from Proto.Actor actors
// that broadcasts one object through Hoplite: a trainer Puts a model on
// node 0, five workers (one per other node) Get it from their own node, and
// Hoplite forms the broadcast tree by itself — nobody declares the pattern.
package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

const (
	nodes     = 6
	modelID   = "weights-v1"
	modelSize = 4 << 20
	// opTimeout bounds each Put/Get inside Hoplite: a reply always comes.
	opTimeout = 20 * time.Second
)

// Application messages. They stay in this process, so plain Go structs do;
// across processes they would be protobuf messages like Hoplite's own.
type (
	fetch struct {
		size int
		sum  [32]byte // sha256 of the model
	}
	report struct {
		node string
		err  error
	}
)

// worker fetches the model on its own node and reports to its parent.
type worker struct {
	node  string
	store *actor.PID // its own node's store node: the copy lands on this node
	want  fetch
}

func (w *worker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case fetch:
		w.want = m
		// Request (not Send): the *messages.GetReply comes back to this actor.
		ctx.Request(w.store, &messages.Get{ObjectId: modelID, TimeoutMs: opTimeout.Milliseconds()})
	case *messages.GetReply:
		err := m.Err() // nil on success; errors.Is works against messages.ErrTimeout etc.
		switch {
		case err != nil:
		case len(m.GetData()) != w.want.size:
			err = fmt.Errorf("got %d bytes, want %d", len(m.GetData()), w.want.size)
		case sha256.Sum256(m.GetData()) != w.want.sum:
			err = fmt.Errorf("checksum mismatch")
		}
		ctx.Send(ctx.Parent(), report{node: w.node, err: err})
	}
}

// trainer Puts the model, then starts the workers, then prints the tree.
type trainer struct {
	ctx     context.Context // bounds the Info call
	l       *cluster.Local
	out     io.Writer
	done    chan<- error // completion signal to run
	model   fetch
	reports int
}

// finish signals run once; later outcomes are dropped, never blocking.
func (t *trainer) finish(err error) {
	select {
	case t.done <- err:
	default:
	}
}

func (t *trainer) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		data := make([]byte, modelSize)
		_, _ = rand.Read(data) // random bytes: nothing compresses or dedups them
		t.model = fetch{size: len(data), sum: sha256.Sum256(data)}
		ctx.Request(t.l.StoreNode(0), &messages.Put{ObjectId: modelID, Data: data, TimeoutMs: opTimeout.Milliseconds()})
	case *messages.PutReply:
		if err := m.Err(); err != nil {
			t.finish(fmt.Errorf("put: %w", err))
			return
		}
		// Workers are children: they stop with the trainer and report to
		// ctx.Parent(); the producer gives a restarted worker a fresh state.
		for i := 1; i < t.l.Nodes(); i++ {
			node, store := t.l.Node(i).GetNodeId(), t.l.StoreNode(i)
			pid := ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return &worker{node: node, store: store} }))
			ctx.Send(pid, t.model)
		}
	case report:
		if m.err != nil {
			t.finish(fmt.Errorf("worker on %s: %w", m.node, m.err))
			return
		}
		t.reports++
		fmt.Fprintf(t.out, "worker on %s fetched %d bytes, checksum ok\n", m.node, t.model.size)
		if t.reports < t.l.Nodes()-1 {
			return
		}
		// The directory recorded every transfer: the tree Hoplite built. (A
		// blocking call holds the mailbox; fine, the trainer is done anyway.)
		info, err := t.l.Client(0).Info(t.ctx, modelID, false)
		if err != nil {
			t.finish(fmt.Errorf("info: %w", err))
			return
		}
		fmt.Fprintf(t.out, "all %d workers have %s; who fetched from whom:\n", t.reports, modelID)
		for _, tr := range info.GetTransfers() {
			if !tr.GetAborted() {
				fmt.Fprintf(t.out, "  %s <- %s\n", tr.GetReceiver(), tr.GetSender())
			}
		}
		t.finish(nil)
	}
}

// run starts the cluster, waits for the trainer or ctx, and stops it all.
func run(ctx context.Context, out io.Writer) error {
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	l, err := cluster.StartLocal(cluster.Config{Nodes: nodes, Log: log})
	if err != nil {
		return err
	}
	defer l.Stop()
	done := make(chan error, 1) // buffered: the trainer never blocks on it
	pid := l.System().Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &trainer{ctx: ctx, l: l, out: out, done: done}
	}))
	// Stop the trainer and workers first: nothing writes to out after run.
	defer func() { _ = l.System().Root.StopFuture(pid).Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("broadcast did not finish: %w", ctx.Err())
	}
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "broadcast:", err)
		os.Exit(1)
	}
}
