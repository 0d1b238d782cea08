package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// holdsNoCopy fails if node i's store or the directory has a copy of id
// on node i: a GetInto keeps none.
func holdsNoCopy(t *testing.T, ctx context.Context, l *Local, i int, id string) {
	t.Helper()
	if o := l.Store(i).Lookup(id); o != nil {
		t.Fatalf("node-%d's store holds %q after GetInto", i, id)
	}
	info, err := l.Client(0).Info(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, loc := range info.GetLocations() {
		if loc.GetNode().GetNodeId() == l.Node(i).GetNodeId() {
			t.Fatalf("the directory lists a copy of %q on node-%d: %v", id, i, info.GetLocations())
		}
	}
}

// TestGetIntoReusedBuffer: GetInto of remote objects into one reused
// buffer returns their exact bytes, the second overwriting the first,
// and leaves the buffer past the object untouched; the receiving node
// keeps no copy and the directory records none. Objects that are local
// (the creator's, or a copy a Get brought) and inline ones come the same.
func TestGetIntoReusedBuffer(t *testing.T) {
	l := start(t, Config{Nodes: 4, ChunkSize: 64 << 10})
	ctx := deadline(t, 30*time.Second)
	a, b := randomBytes(1, 1<<20+123), randomBytes(2, 700<<10+5)
	small := []byte("an inline object, answered by the directory")
	if err := l.Client(0).Put(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(1).Put(ctx, "b", b); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(1).Put(ctx, "small", small); err != nil {
		t.Fatal(err)
	}
	buf := bytes.Repeat([]byte{0xee}, 2<<20)
	check := func(node int, id string, want []byte) {
		t.Helper()
		before := bytes.Clone(buf[len(want):])
		n, err := l.Client(node).GetInto(ctx, id, buf)
		if err != nil {
			t.Fatalf("GetInto(%s) on node-%d: %v", id, node, err)
		}
		if n != len(want) || !bytes.Equal(buf[:n], want) {
			t.Fatalf("GetInto(%s) on node-%d: %d bytes, not the %d that were put", id, node, n, len(want))
		}
		if !bytes.Equal(buf[n:], before) {
			t.Fatalf("GetInto(%s) wrote past the object's %d bytes", id, n)
		}
	}
	check(2, "a", a)
	check(2, "b", b) // shorter: overwrites a's first bytes only
	check(2, "a", a)
	check(2, "small", small)
	for _, id := range []string{"a", "b", "small"} {
		holdsNoCopy(t, ctx, l, 2, id)
	}
	check(0, "a", a) // the creator's own copy
	if _, err := l.Client(3).Get(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	check(3, "b", b) // the copy the Get brought
}

// TestGetIntoErrors: a buffer shorter than the object fails with
// INVALID_ARGUMENT naming both sizes and writes nothing; a missing
// object fails as Get does (TIMEOUT by a short deadline; NOT_FOUND-like
// codes from the directory: DELETED after a Delete, LOST when the only
// copy died), and an invalid id is INVALID_ARGUMENT.
func TestGetIntoErrors(t *testing.T) {
	l := start(t, Config{Nodes: 3, ChunkSize: 64 << 10})
	ctx := deadline(t, 30*time.Second)
	data := randomBytes(3, 300<<10)
	if err := l.Client(0).Put(ctx, "x", data); err != nil {
		t.Fatal(err)
	}
	for _, node := range []int{0, 1} { // local and remote
		buf := bytes.Repeat([]byte{7}, len(data)-1)
		_, err := l.Client(node).GetInto(ctx, "x", buf)
		if !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), fmt.Sprint(len(data))) ||
			!strings.Contains(err.Error(), fmt.Sprint(len(buf))) {
			t.Fatalf("node-%d: a short buffer: %v, want INVALID_ARGUMENT naming %d and %d", node, err, len(data), len(buf))
		}
		if bytes.Count(buf, []byte{7}) != len(buf) {
			t.Fatalf("node-%d: a short buffer was written", node)
		}
	}

	same := func(id string, want error) {
		t.Helper()
		gctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, gerr := l.Client(1).Get(gctx, id)
		ictx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, ierr := l.Client(2).GetInto(ictx, id, make([]byte, 1<<20))
		if !errors.Is(gerr, want) || !errors.Is(ierr, want) {
			t.Fatalf("%s: Get %v, GetInto %v, want %v", id, gerr, ierr, want)
		}
	}
	same("never-put", messages.ErrTimeout)
	if err := l.Client(0).Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	same("x", messages.ErrDeleted)
	// An object whose shard stays where it is (a rebuilt shard would not
	// know it was lost: Get and GetInto would wait for it).
	only := ""
	for i := 0; only == ""; i++ {
		if id := fmt.Sprintf("only-%d", i); l.Member(0).ShardOwner(id) != l.Member(1).ID() {
			only = id
		}
	}
	if err := l.Client(1).Put(ctx, only, data); err != nil {
		t.Fatal(err)
	}
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	_, err := l.Client(2).GetInto(ctx, only, make([]byte, len(data)))
	if !errors.Is(err, messages.ErrLost) {
		t.Fatalf("GetInto of an object whose only copy died: %v, want LOST", err)
	}
	if _, err := l.Client(0).Get(ctx, only); !errors.Is(err, messages.ErrLost) {
		t.Fatalf("Get of an object whose only copy died: %v, want LOST", err)
	}
	if _, err := l.Client(2).GetInto(ctx, "", make([]byte, 1)); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("an empty id: %v", err)
	}
}

// TestGetIntoSenderKilledMidTransfer: the node a GetInto streams from is
// killed mid-transfer. With another whole copy, the GetInto resumes from
// it at the bytes it holds and returns the exact bytes (a SenderSwitched
// event says so); with none, it fails with a typed error, never a partial
// success. Either way it returns only once nothing writes the buffer any
// more: the test overwrites it right away, which the race detector
// checks against the copy goroutine.
func TestGetIntoSenderKilledMidTransfer(t *testing.T) {
	const chunk = 64 << 10
	const chunks = 32
	var armed atomic.Bool
	stalled, release := make(chan struct{}, 1), make(chan struct{})
	cfg := Config{Nodes: 4, ChunkSize: chunk}
	cfg.hooks.Store.BeforeFetchChunk = func(node, id string, off int64) {
		if node == "node-3" && off == 10*chunk && armed.CompareAndSwap(true, false) {
			stalled <- struct{}{}
			<-release
		}
	}
	l := start(t, cfg)
	evs := recordEvents(t, l)
	ctx := deadline(t, 60*time.Second)
	data := randomBytes(4, chunks*chunk)

	// Another whole copy: node-1's, after node-0's (the creator's), so
	// node-0 is read first (a free copy, complete, oldest).
	if err := l.Client(0).Put(ctx, "x", data); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client(1).Get(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	settledInfo(t, ctx, l.Client(1), "x")
	buf := make([]byte, len(data))
	armed.Store(true)
	done := make(chan error, 1)
	go func() {
		n, err := l.Client(3).GetInto(ctx, "x", buf)
		if err == nil && (n != len(data) || !bytes.Equal(buf[:n], data)) {
			err = fmt.Errorf("%d bytes, other than were put", n)
		}
		done <- err
	}()
	<-stalled
	if err := l.Kill(0); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("GetInto after its sender was killed, with another copy left: %v", err)
	}
	clear(buf)
	switched := false
	for _, e := range eventsOf[*events.SenderSwitched](evs) {
		if e.Object == "x" && e.Receiver == "node-3" && e.From == "node-0" && e.To == "node-1" && e.Offset == 10*chunk {
			switched = true
		}
	}
	if !switched {
		t.Fatalf("no SenderSwitched node-0 -> node-1 at %d for node-3: %v", 10*chunk, eventsOf[*events.SenderSwitched](evs))
	}

	// The only copy: node-1's Put, killed mid-transfer. Its shard is
	// elsewhere (a rebuilt one would not know the object was lost).
	y := ""
	for i := 0; y == ""; i++ {
		if id := fmt.Sprintf("y-%d", i); l.Member(3).ShardOwner(id) != l.Member(1).ID() {
			y = id
		}
	}
	if err := l.Client(1).Put(ctx, y, data); err != nil {
		t.Fatal(err)
	}
	release = make(chan struct{})
	armed.Store(true)
	go func() {
		_, err := l.Client(3).GetInto(ctx, y, buf)
		done <- err
	}()
	<-stalled
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	close(release)
	err := <-done
	var e *messages.Error
	if !errors.As(err, &e) || !errors.Is(err, messages.ErrLost) && !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("GetInto whose only sender was killed: %v, want a typed LOST or UNAVAILABLE", err)
	}
	clear(buf)
}

// TestGetIntoReturnsAfterTheWriterLetsGo: a GetInto whose deadline passes
// while its copy goroutine is busy with a chunk returns TIMEOUT only once
// that goroutine has let go of the buffer.
func TestGetIntoReturnsAfterTheWriterLetsGo(t *testing.T) {
	const chunk = 64 << 10
	var armed, hookDone atomic.Bool
	entered := make(chan struct{}, 1)
	cfg := Config{Nodes: 2, ChunkSize: chunk}
	cfg.hooks.Store.BeforeFetchChunk = func(node, id string, off int64) {
		if node == "node-1" && armed.CompareAndSwap(true, false) {
			entered <- struct{}{}
			time.Sleep(500 * time.Millisecond) // past the caller's deadline
			hookDone.Store(true)
		}
	}
	l := start(t, cfg)
	ctx := deadline(t, 30*time.Second)
	data := randomBytes(5, 8*chunk)
	if err := l.Client(0).Put(ctx, "x", data); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(data))
	armed.Store(true)
	gctx, cancel := context.WithCancel(ctx)
	go func() {
		<-entered
		cancel() // the caller gives up while the chunk is being stored
	}()
	_, err := l.Client(1).GetInto(gctx, "x", buf)
	if !hookDone.Load() {
		t.Fatal("GetInto returned while its copy goroutine still held the buffer")
	}
	if !errors.Is(err, messages.ErrCanceled) && !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("GetInto whose caller gave up: %v", err)
	}
	clear(buf)
	n, err := l.Client(1).GetInto(ctx, "x", buf)
	if err != nil || !bytes.Equal(buf[:n], data) {
		t.Fatalf("GetInto again into the same buffer: %v", err)
	}
}

// TestGetIntoConcurrentWithGet: before the object exists, a Get and two
// GetIntos on one node (into two buffers) and a GetInto on another wait
// together; when it is Put each returns the exact bytes, and only the
// Get leaves a copy.
func TestGetIntoConcurrentWithGet(t *testing.T) {
	l := start(t, Config{Nodes: 3, ChunkSize: 64 << 10})
	ctx := deadline(t, 30*time.Second)
	data := randomBytes(6, 1<<20)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	wg.Add(1)
	go func() {
		defer wg.Done()
		b, err := l.Client(1).Get(ctx, "late")
		if err == nil && !bytes.Equal(b, data) {
			err = errors.New("Get: other bytes")
		}
		errs <- err
	}()
	for _, node := range []int{1, 1, 2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, len(data)+10)
			n, err := l.Client(node).GetInto(ctx, "late", buf)
			if err == nil && !bytes.Equal(buf[:n], data) {
				err = fmt.Errorf("GetInto on node-%d: other bytes", node)
			}
			errs <- err
		}()
	}
	time.Sleep(100 * time.Millisecond) // let them park (the test passes either way)
	if err := l.Client(0).Put(ctx, "late", data); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if o := l.Store(1).Lookup("late"); o == nil {
		t.Fatal("the Get's copy is missing on node-1")
	}
	holdsNoCopy(t, ctx, l, 2, "late")
}

// TestMembersGetInto: two members in one process, on the TCP data plane
// (which reads each chunk from the socket straight into the buffer):
// GetInto of two objects into one reused buffer, each exact, none kept.
func TestMembersGetInto(t *testing.T) {
	a, b := joinPair(t, testLogger(t, logrus.WarnLevel), nil)
	ctx := deadline(t, 20*time.Second)
	one, two := randomBytes(7, 3<<20+17), randomBytes(8, 2<<20+1)
	if err := a.Client().Put(ctx, "one", one); err != nil {
		t.Fatal(err)
	}
	if err := a.Client().Put(ctx, "two", two); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4<<20)
	for _, c := range []struct {
		id   string
		want []byte
	}{{"one", one}, {"two", two}, {"one", one}} {
		n, err := b.Client().GetInto(ctx, c.id, buf)
		if err != nil || n != len(c.want) || !bytes.Equal(buf[:n], c.want) {
			t.Fatalf("GetInto(%s): %d bytes, %v", c.id, n, err)
		}
	}
	if _, err := b.Client().GetInto(ctx, "one", buf[:len(one)-1]); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("a short buffer: %v", err)
	}
	if b.store.Lookup("one") != nil || b.store.Lookup("two") != nil {
		t.Fatal("the receiving member kept a copy")
	}
}
