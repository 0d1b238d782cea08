package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// fakeHome answers a deputy's Locates as a home would, counting what it
// is sent; the first Locate sent alone blocks until release is closed
// (nil: never blocks).
type fakeHome struct {
	mu      sync.Mutex
	alone   []string // object ids sent alone
	batches [][]*messages.Locate
	direct  func(i int) bool // which of a batch the home leaves
	release chan struct{}
	inline  bool // alone answers carry the bytes (else a sender)
}

func (h *fakeHome) deputy() *locateDeputy {
	return newLocateDeputy(
		func(ctx context.Context, addr string, ls []*messages.Locate) ([]*messages.LocateReply, []bool, error) {
			h.mu.Lock()
			h.batches = append(h.batches, ls)
			h.mu.Unlock()
			replies, direct := make([]*messages.LocateReply, len(ls)), make([]bool, len(ls))
			for i, l := range ls {
				if h.direct != nil && h.direct(i) {
					direct[i] = true
					continue
				}
				replies[i] = &messages.LocateReply{ObjectId: l.GetObjectId(), HasInline: true, InlineData: []byte("abc"), Size: 3, Attempt: l.GetAttempt()}
			}
			return replies, direct, nil
		},
		func(ctx context.Context, addr string, l *messages.Locate) (*messages.LocateReply, error) {
			h.mu.Lock()
			h.alone = append(h.alone, l.GetObjectId())
			rel := h.release
			if len(h.alone) > 1 {
				rel = nil // only the first waits for the test
			}
			h.mu.Unlock()
			if rel != nil {
				select {
				case <-rel:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			if h.inline {
				return &messages.LocateReply{ObjectId: l.GetObjectId(), HasInline: true, InlineData: []byte("abc"), Size: 3, Attempt: l.GetAttempt()}, nil
			}
			return &messages.LocateReply{ObjectId: l.GetObjectId(), Sender: &messages.NodeRef{NodeId: "s"}, Attempt: l.GetAttempt()}, nil
		})
}

// A deputy sends an object's first Locate on at once, alone; those that
// come while it is out wait for its answer, and once that brought the
// bytes they go on in one batch, each answered with its own attempt; one
// the home leaves is asked alone, and from then on the object's Locates
// go alone, at once.
func TestLocateDeputyBatchesWhatComesWhileOneIsOut(t *testing.T) {
	h := &fakeHome{release: make(chan struct{}), inline: true, direct: func(i int) bool { return i == 2 }}
	d := h.deputy()
	d.probeWait = time.Hour // the batch waits for the first answer, however late
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first := make(chan error, 1)
	go func() {
		_, err := d.Locate(ctx, "home", &messages.Locate{ObjectId: "o", Attempt: 100})
		first <- err
	}()
	eventually(t, 10*time.Second, "the first Locate sent alone", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.alone) == 1 })
	const n = 5
	var wg sync.WaitGroup
	got := make([]*messages.LocateReply, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got[i], errs[i] = d.Locate(ctx, "home", &messages.Locate{ObjectId: "o", Attempt: uint64(i + 1)})
		})
	}
	eventually(t, 10*time.Second, "the Locates queued", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.objects[deputyKey{"home", "o"}].queue) == n
	})
	close(h.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	h.mu.Lock()
	batches, alone := h.batches, slices.Clone(h.alone)
	h.mu.Unlock()
	if len(batches) != 1 || len(batches[0]) != n {
		t.Fatalf("%d batches, want one of the %d Locates that came while the first was out", len(batches), n)
	}
	for i := range n {
		if errs[i] != nil || got[i].GetAttempt() != uint64(i+1) || string(got[i].GetInlineData()) != "abc" {
			t.Fatalf("Locate %d: %v, %v", i+1, got[i], errs[i])
		}
	}
	if len(alone) != 2 {
		t.Fatalf("sent alone: %v, want the first and the one the home left", alone)
	}
	// The home left one: the object's next Locates go alone at once.
	if _, err := d.Locate(ctx, "home", &messages.Locate{ObjectId: "o", Attempt: 9}); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.batches) != 1 || len(h.alone) != 3 {
		t.Fatalf("%d batches and %d sent alone after the home left one, want 1 and 3", len(h.batches), len(h.alone))
	}
}

// Until the home answered an object with its bytes, the Locates that
// come while its first is out go alone once the probe's wait ends (the
// first may wait at the shard for an object not there yet), and those
// that come after it at once: no batch.
func TestLocateDeputySendsAloneUntilTheBytesCame(t *testing.T) {
	h := &fakeHome{release: make(chan struct{})}
	d := h.deputy()
	d.probeWait = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go d.Locate(ctx, "home", &messages.Locate{ObjectId: "s"})
	eventually(t, 10*time.Second, "the first Locate sent alone", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.alone) == 1 })
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if r, err := d.Locate(ctx, "home", &messages.Locate{ObjectId: "s"}); err != nil || r.GetSender() == nil {
				t.Errorf("a Locate that waited for the probe: %v, %v", r, err)
			}
		})
	}
	wg.Wait()
	// The probe's answer did not come: the object's next Locate goes
	// alone at once, not after another wait.
	d.mu.Lock()
	d.probeWait = time.Hour
	d.mu.Unlock()
	soon, cancelSoon := context.WithTimeout(ctx, 5*time.Second)
	defer cancelSoon()
	if _, err := d.Locate(soon, "home", &messages.Locate{ObjectId: "s"}); err != nil {
		t.Fatalf("a Locate after the probe's wait ran out: %v", err)
	}
	close(h.release)
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.batches) != 0 || len(h.alone) != 5 {
		t.Fatalf("%d batches and %d sent alone, want none and 5", len(h.batches), len(h.alone))
	}
}

// A Locate that waits at a deputy leaves at its own deadline, TIMEOUT,
// and out of the queue: it is not sent on.
func TestLocateDeputyWaiterLeavesAtItsDeadline(t *testing.T) {
	h := &fakeHome{release: make(chan struct{}), inline: true}
	d := h.deputy()
	d.window, d.probeWait = time.Hour, time.Hour // the batch never goes while the test looks
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go d.Locate(ctx, "home", &messages.Locate{ObjectId: "o"})
	eventually(t, 10*time.Second, "the first Locate sent alone", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return len(h.alone) == 1 })
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, err := d.Locate(short, "home", &messages.Locate{ObjectId: "o"})
	if !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("a waiter past its deadline: %v, want TIMEOUT", err)
	}
	d.mu.Lock()
	left := len(d.objects[deputyKey{"home", "o"}].queue)
	d.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d Locates still queued after their receiver left, want none (the home would record copies for them)", left)
	}
	close(h.release)
}

// Through Locate deputies (two groups in a cluster of 8), every member's
// Get of a small object whose shard is on another member gets its bytes,
// and the deputies sent Locates on; a batch to the shard's member is
// answered with the bytes; a Get that starts after the Delete
// completed is DELETED through them too; and when a receiver's deputy
// is killed, its Get asks the shard straight and still gets the bytes.
func TestLocateDeputiesServeGets(t *testing.T) {
	const nodes = 8
	l := start(t, Config{Nodes: nodes, LocateDeputies: 2})
	ctx := deadline(t, 60*time.Second)
	id := idOnNode("dep", 1, nodes, nodes) // shard on node 1
	data := testutil.Pattern(7, 1<<10)
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	sent := func() (n int64) {
		for i := range nodes {
			d := l.Member(i).deputy
			n += d.sentAlone.Load() + d.batched.Load()
		}
		return n
	}
	var wg sync.WaitGroup
	errs := make([]error, nodes)
	for i := range nodes {
		wg.Go(func() {
			got, err := l.Client(i).Get(ctx, id)
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("wrong bytes")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d's Get through the deputies: %v", i, err)
		}
	}
	if sent() == 0 {
		t.Fatal("no Locate went through a deputy")
	}
	// A batch, as a deputy sends it to the shard's member (no-copy
	// Locates: the directory records no copy for them).
	ls := []*messages.Locate{{ObjectId: id, NoCopy: true, Attempt: 1}, {ObjectId: id, NoCopy: true, Attempt: 2}}
	replies, direct, err := l.Member(3).deputy.batch(ctx, l.Member(1).ref.GetDataAddress(), ls)
	if err != nil || direct[0] || direct[1] || !bytes.Equal(replies[0].GetInlineData(), data) || replies[1].GetAttempt() != 2 {
		t.Fatalf("a batch to the shard's member: %v, direct %v, %v", replies, direct, err)
	}

	if err := l.Client(0).Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	for i := range nodes {
		if i == 1 {
			continue
		}
		if got, err := l.Client(i).Get(ctx, id); !errors.Is(err, messages.ErrDeleted) {
			t.Fatalf("node %d's Get after the Delete completed: %d bytes, %v; want DELETED", i, len(got), err)
		}
	}

	// A receiver whose deputy is another member; kill that member.
	id2 := idOnNode("dep2", 1, nodes, nodes)
	if err := l.Client(0).Put(ctx, id2, data); err != nil {
		t.Fatal(err)
	}
	pid := l.Member(2).shardFor(id2)
	receiver, deputy := -1, -1
	for r := range nodes {
		via, _ := l.Member(r).deputyFor(pid)
		for k := range nodes {
			if via != "" && k != 0 && k != 1 && l.Member(k).ref.GetDataAddress() == via {
				receiver, deputy = r, k
			}
		}
		if receiver >= 0 {
			break
		}
	}
	if receiver < 0 {
		t.Fatal("no receiver has a deputy other than the creator and the shard's member")
	}
	if err := l.Kill(deputy); err != nil {
		t.Fatal(err)
	}
	got, err := l.Client(receiver).Get(ctx, id2)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("node %d's Get with its deputy node %d killed: %v", receiver, deputy, err)
	}
}
