package processtest

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// A creator that stalls is not a failure. A receiver whose stream from a
// paused creator (SIGSTOP, shorter than the health checks tolerate) makes
// no progress for -stall-timeout asks the directory for another sender,
// naming the creator as failed. The directory keeps the creator's whole
// copy, the only one: once the creator runs again, the receiver's Get and
// a later Get elsewhere both complete, byte-exact, and nobody was
// expelled. (Removed on the receiver's word, the copy was offered to
// nobody while its process lived: both Gets waited to their deadline.)
func TestProcessStalledCreatorStaysListed(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	var nodes []*nodeProc
	for i := range 3 {
		// 64 KiB chunks, each stored 2 ms after it arrives: the 32 MiB
		// take a second, so the pause lands mid-stream whatever the
		// sockets buffer.
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-stall-timeout", "300ms", "-chunk-size", "64KiB", "-test-chunk-delay", "2ms"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)
	creator, receiver, later := nodes[0], nodes[1], nodes[2]
	// The object's shard is on the receiver's member: the pause holds the
	// creator's copy, not the directory.
	id := idOwnedBy(t, view, receiver.id, "stalled-creator")
	data := randomBytes(21, 32<<20)
	putRetry(t, c.of(creator), id, data)

	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := c.of(receiver).Get(ctx, id)
		if err == nil && !bytes.Equal(got, data) {
			err = fmt.Errorf("other bytes")
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := creator.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // several stall timeouts; under the 3 missed health checks of 2 s that expel
	if err := creator.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Get on %s of the paused creator's object: %v", receiver.id, err)
	}
	getExact(t, c.of(later), id, data)
	if inc := creator.incarnations(); len(inc) != 1 {
		t.Errorf("the paused creator was expelled: incarnations %v", inc)
	}
}
