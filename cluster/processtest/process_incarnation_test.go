package processtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// TestProcessRestartedMemberIsNotItsPredecessor: a `hoplite node`
// SIGKILLed and started again at the same actor system and data plane
// addresses is a new incarnation. Requests built for the killed one (its
// store node's PID, its data address, as a peer or a tool kept them) are
// answered UNAVAILABLE by the new process and leave nothing in it.
func TestProcessRestartedMemberIsNotItsPredecessor(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	dataBind := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	a := startNode(t, bin, slots[0], seeds)
	b := startNode(t, bin, slots[1], seeds, "-data-bind", dataBind)
	a.waitStarted(t, 60*time.Second)
	b.waitStarted(t, 60*time.Second)
	c := newTestClient(t)
	c.converge(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, err := cluster.Hello(ctx, c.system.Root, b.address)
	if err != nil {
		t.Fatal(err)
	}
	old := first.GetStore()
	if old.GetNodeId() != b.id || !old.PID().Equal(b.store()) {
		t.Fatalf("b's hello names store %v, its start line %s", old, b.id)
	}

	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-b.exited
	again := startNode(t, bin, slots[1], seeds, "-data-bind", dataBind)
	again.waitStarted(t, 60*time.Second)
	c.converge(t, a, again)
	next, err := cluster.Hello(ctx, c.system.Root, again.address)
	if err != nil {
		t.Fatal(err)
	}
	if next.GetStore().GetNodeId() == old.GetNodeId() || transport.HostPort(next.GetStore().GetDataAddress()) != dataBind {
		t.Fatalf("the restarted node's store %v; the killed one's %v", next.GetStore(), old)
	}

	// A Put to the killed incarnation's store node.
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	err = storenode.NewClient(c.system.Root, old.PID(), 10*time.Second).Put(pctx, "for-the-killed", []byte("meant for b's first incarnation"))
	pcancel()
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a Put to the killed incarnation's store node = %v, want UNAVAILABLE", err)
	}
	info, err := c.of(again).Info(ctx, "for-the-killed", false)
	if !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("the restarted node's directory knows an object Put to the killed one: %v, %v", info, err)
	}

	// The killed incarnation's data plane: an object the restarted node
	// holds is not streamed, nor located, for a request to that address.
	putRetry(t, c.of(again), "held", []byte("the restarted node's object"))
	tr := transport.NewTCP(transport.TCPConfig{})
	defer tr.Close()
	if s, err := tr.Open(ctx, "", old.GetDataAddress(), "held", 0, 1<<16); err == nil {
		s.Close()
		t.Fatal("a stream from the killed incarnation's data address was served by the restarted node")
	} else if !errors.Is(err, messages.ErrUnavailable) || !strings.Contains(err.Error(), "another incarnation") {
		t.Fatalf("a stream from the killed incarnation's data address = %v, want UNAVAILABLE naming another incarnation", err)
	}
	if _, err := tr.Call(ctx, old.GetDataAddress(), messages.ControlPing, nil); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a control request to the killed incarnation's data address = %v, want UNAVAILABLE", err)
	}
	if _, err := tr.Call(ctx, next.GetStore().GetDataAddress(), messages.ControlPing, nil); err != nil {
		t.Fatalf("a control request to the restarted node's own data address: %v", err)
	}
}
