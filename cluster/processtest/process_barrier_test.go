package processtest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// Barriers on `hoplite node` processes, used from a process outside the
// cluster: the replicated manager loses the primary's member and then a
// backup's member (SIGKILL) mid-barrier and every label still passes once;
// the barrier then closes with only its live replica acknowledging.
func TestProcessBarriers(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 5)
	nodes, c, _ := startConverged(t, bin, slots, seeds)
	var addrs []string
	byID := map[string]*nodeProc{}
	for _, n := range nodes {
		addrs = append(addrs, n.address)
		byID[n.id] = n
	}
	bc := cluster.NewBarrierClient(c.system, addrs...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A plain barrier: three participants, each through its own handle.
	if _, err := barrier.New(ctx, bc, "proc-plain", barrier.Max(3)); err != nil {
		t.Fatal(err)
	}
	passes := enterEach(ctx, t, bc, "proc-plain", "a", "b", "c")
	for l, reason := range passes {
		if reason != "max" {
			t.Fatalf("%s passed with %q, want max", l, reason)
		}
	}

	// The same on the combining tree (a cluster this small enters
	// straight unless Fanout asks for the tree): six participants, their
	// Enters up a tree of fan-out 2 over the five member processes.
	if _, err := barrier.New(ctx, bc, "proc-tree", barrier.Max(6), barrier.Fanout(2)); err != nil {
		t.Fatal(err)
	}
	for l, reason := range enterEach(ctx, t, bc, "proc-tree", "t1", "t2", "t3", "t4", "t5", "t6") {
		if reason != "max" {
			t.Fatalf("%s passed the tree barrier with %q, want max", l, reason)
		}
	}

	// Close returns once every replica applied it: from then on no
	// replica, in any member process, answers the barrier open.
	cb, err := barrier.New(ctx, bc, "proc-close", barrier.Max(3), barrier.Replicas(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := cb.Close(ctx); err != nil {
		t.Fatalf("close with every replica alive: %v", err)
	}
	for i := range 10 {
		if _, err := barrier.Open(ctx, bc, "proc-close"); !errors.Is(err, messages.ErrDeleted) {
			t.Fatalf("open %d after Close returned: %v, want DELETED", i, err)
		}
	}

	// The replicated barrier: its members, primary first, die one by one.
	b, err := barrier.New(ctx, bc, "proc-failover", barrier.Max(6), barrier.Replicas(3),
		barrier.TakeoverAfter(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	replicas := b.Replicas()
	if len(replicas) != 3 {
		t.Fatalf("replicas %v, want 3 members", replicas)
	}
	done := make(chan error, 6)
	enter := func(labels ...string) {
		for _, l := range labels {
			go func() {
				_, err := b.Enter(ctx, l)
				done <- err
			}()
		}
	}
	waitEntered := func(n int) {
		t.Helper()
		end := time.Now().Add(30 * time.Second)
		for {
			s, err := b.Status(ctx)
			if err == nil && s.Entered >= n {
				return
			}
			if time.Now().After(end) {
				t.Fatalf("waiting for %d entries: %+v %v", n, s, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	kill := func(id string) {
		t.Helper()
		p := byID[id]
		if p == nil {
			t.Fatalf("no process for member %s", id)
		}
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-p.exited
	}
	enter("e1", "e2")
	waitEntered(2)
	kill(replicas[0]) // the primary's member
	enter("e3", "e4")
	waitEntered(4)
	kill(replicas[2]) // a backup's member (replicas[1] is the new primary)
	enter("e5", "e6")
	for range 6 {
		if err := <-done; err != nil {
			t.Fatalf("an entry failed after the managers' members died: %v", err)
		}
	}
	s, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Fired || s.Entered != 6 || len(s.Passed) != 6 || s.Primary != replicas[1] || s.Epoch < 1 {
		t.Fatalf("status %+v: want fired, 6 passed once each, primary %s after a takeover", s, replicas[1])
	}
	seen := map[string]bool{}
	for _, p := range s.Passed {
		if seen[p.Label] {
			t.Fatalf("%s passed twice: %+v", p.Label, s.Passed)
		}
		seen[p.Label] = true
	}
	// Close after the takeovers waits only for the replica on the live
	// member: the dead members' replicas never acknowledge, and their
	// members were declared failed (before, Close failed TIMEOUT here).
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close with two of three replicas' members dead: %v", err)
	}
	if _, err := barrier.Open(ctx, bc, "proc-failover"); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("open after Close returned: %v, want DELETED", err)
	}
}

// enterEach enters each label through its own handle (Open) and returns
// the fire reasons.
func enterEach(ctx context.Context, t *testing.T, c barrier.Cluster, name string, labels ...string) map[string]string {
	t.Helper()
	type res struct {
		label, reason string
		err           error
	}
	out := make(chan res, len(labels))
	for _, l := range labels {
		h, err := barrier.Open(ctx, c, name, barrier.Host("host-"+l))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Stop)
		go func() {
			p, err := h.Enter(ctx, l)
			r := res{label: l, err: err}
			if p != nil {
				r.reason = p.Reason
			}
			out <- r
		}()
	}
	got := map[string]string{}
	var errs []string
	for range labels {
		r := <-out
		if r.err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", r.label, r.err))
		}
		got[r.label] = r.reason
	}
	sort.Strings(errs)
	if len(errs) > 0 {
		t.Fatalf("entries failed: %v", errs)
	}
	return got
}
