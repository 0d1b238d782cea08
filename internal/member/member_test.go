package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/testutil"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(t testing.TB, n int) []int { return testutil.FreePorts(t, n) }

// syncBuffer collects a logger's output for a failing test.
type syncBuffer = testutil.SyncBuffer

func testLogger(t testing.TB, level logrus.Level) *logrus.Logger {
	buf := &syncBuffer{}
	log := logrus.New()
	log.SetOutput(buf)
	log.SetLevel(level)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("member logs:\n%s", buf.String())
		}
	})
	return log
}

type memberSlot struct{ bind, manage string }

func memberSlots(t testing.TB, n int) ([]memberSlot, []string) {
	binds, seeds := testutil.MemberSlots(t, n)
	var slots []memberSlot
	for i := range binds {
		slots = append(slots, memberSlot{bind: binds[i], manage: seeds[i]})
	}
	return slots, seeds
}

// joinMembers starts n members that log to log, each seeded with all
// of them, and waits until every one sees all n.
func joinMembers(t testing.TB, n int, log *logrus.Logger) []*Member {
	t.Helper()
	slots, seeds := memberSlots(t, n)
	var ms []*Member
	for _, s := range slots {
		m, err := joinSlot(t, s, seeds, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	waitMembers(t, n, ms...)
	return ms
}

// managePort is the slot's manage port, checked free with its bind port.
func (s memberSlot) managePort() int {
	_, mp, _ := net.SplitHostPort(s.manage)
	port, _ := strconv.Atoi(mp)
	return port
}

func joinSlot(t testing.TB, s memberSlot, seeds []string, log *logrus.Logger, mod func(*MemberConfig)) (*Member, error) {
	t.Helper()
	cfg := MemberConfig{Bind: s.bind, ManagePort: s.managePort(), Seeds: seeds, Shards: 16, ChunkSize: 256 << 10,
		Log: log, RefreshInterval: 100 * time.Millisecond, JoinTimeout: 20 * time.Second, DefaultTimeout: 20 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Join(ctx, cfg)
	if err == nil {
		t.Cleanup(m.Stop)
	}
	return m, err
}

// joinPair joins two members on the TCP data plane (each configured by
// mod, if set) and waits until both see both.
func joinPair(t testing.TB, log *logrus.Logger, mod func(*MemberConfig)) (a, b *Member) {
	t.Helper()
	slots, seeds := memberSlots(t, 2)
	a, err := joinSlot(t, slots[0], seeds, log, mod)
	if err != nil {
		t.Fatal(err)
	}
	b, err = joinSlot(t, slots[1], seeds, log, mod)
	if err != nil {
		t.Fatal(err)
	}
	waitMembers(t, 2, a, b)
	return a, b
}

func waitMembers(t testing.TB, n int, ms ...*Member) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, m := range ms {
		if err := m.WaitMembers(ctx, n); err != nil {
			t.Fatalf("%s: %v", m.ID(), err)
		}
	}
}

// Two members in one test process (two actor systems on 127.0.0.1 with
// their own ports, talking through Proto.Actor remote and the TCP data
// plane): Put on one, Get on the other, byte-exact; small objects come
// inline; Reduce across both.
func TestMembersPutGet(t *testing.T) {
	a, b := joinPair(t, testLogger(t, logrus.InfoLevel), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	rng := rand.New(rand.NewSource(1))
	big := make([]byte, 3<<20+123)
	rng.Read(big)
	if err := a.Client().Put(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	got, err := b.Client().Get(ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) {
		t.Fatal("Get returned other bytes than were Put")
	}
	info, err := b.Client().Info(ctx, "big", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.GetTransfers()) != 1 || info.GetTransfers()[0].GetSender() != a.ID() || info.GetTransfers()[0].GetReceiver() != b.ID() {
		t.Fatalf("transfers %v", info.GetTransfers())
	}

	small := []byte("a small object, kept inline in the directory")
	if err := b.Client().Put(ctx, "small", small); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Client().Get(ctx, "small"); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("small: %q, %v", got, err)
	}

	// Reduce: int32 sources on both members, the sum on either.
	const elems = 300 << 10
	want := make([]byte, 4*elems)
	var sources []string
	for i, m := range []*Member{a, b, a, b} {
		src := make([]byte, 4*elems)
		for k := 0; k < elems; k++ {
			v := uint32(rng.Int31())
			putU32(src[4*k:], v)
			putU32(want[4*k:], getU32(want[4*k:])+v)
		}
		id := fmt.Sprintf("src-%d", i)
		sources = append(sources, id)
		if err := m.Client().Put(ctx, id, src); err != nil {
			t.Fatal(err)
		}
	}
	reply, err := a.Client().Reduce(ctx, "sum", sources, 4, messages.ReduceOp_SUM, messages.DType_INT32)
	if err != nil {
		t.Fatal(err)
	}
	if len(reply.GetReducedIds()) != 4 {
		t.Fatalf("reduced %v", reply.GetReducedIds())
	}
	for _, m := range []*Member{a, b} {
		got, err := m.Client().Get(ctx, "sum")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: wrong reduce result", m.ID())
		}
	}
	// Both members place the shards the same way.
	for _, id := range []string{"big", "small", "sum", "x", "y"} {
		if a.ShardOwner(id) != b.ShardOwner(id) || a.ShardOwner(id) == "" {
			t.Fatalf("shard owner of %q: %q vs %q", id, a.ShardOwner(id), b.ShardOwner(id))
		}
	}
	// Barriers: created from one member, entered through both, their
	// primaries on either (every member hosts barrier managers).
	primaries := map[string]bool{}
	for i := 0; len(primaries) < 2; i++ {
		if i == 16 {
			t.Fatalf("16 barriers, all with their primary on %v", primaries)
		}
		name := fmt.Sprintf("members-%d", i)
		ctrl, err := barrier.New(ctx, a, name, barrier.Max(2), barrier.Replicas(2))
		if err != nil {
			t.Fatal(err)
		}
		primaries[ctrl.Replicas()[0]] = true
		errs := make(chan error, 2)
		for _, m := range []*Member{a, b} {
			h, err := barrier.Open(ctx, m, name, barrier.Host(m.ID()))
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				defer h.Stop()
				p, err := h.Enter(ctx, "from-"+m.ID())
				if err == nil && p.Reason != "max" {
					err = fmt.Errorf("passed with %q, want max", p.Reason)
				}
				errs <- err
			}()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("barrier %s: %v", name, err)
			}
		}
		ctrl.Stop()
	}
	hosts, err := b.BarrierHosts(ctx)
	if err != nil || len(hosts) != 2 {
		t.Fatalf("barrier hosts %v, %v", hosts, err)
	}
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
func getU32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// A member that dies (crash: what SIGKILL does to a process) is failed
// for the others: the survivor publishes NodeFailed once, takes over
// every shard and still serves what it holds; objects that lived only on
// the failed member are gone from the directory.
func TestMemberFailureInProcess(t *testing.T) {
	log := testLogger(t, logrus.InfoLevel)
	ms := joinMembers(t, 3, log)
	failed := make(chan *events.NodeFailed, 16)
	ms[0].System().EventStream.Subscribe(func(e any) {
		if f, ok := e.(*events.NodeFailed); ok {
			failed <- f
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data := bytes.Repeat([]byte("hoplite"), 200<<10)
	if err := ms[0].Client().Put(ctx, "kept", data); err != nil {
		t.Fatal(err)
	}
	if _, err := ms[2].Client().Get(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	victim := ms[2].ID()
	ms[2].crash(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s killed", victim))
	select {
	case f := <-failed:
		if f.Node != victim {
			t.Fatalf("NodeFailed %+v, want %s", f, victim)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no NodeFailed")
	}
	waitMembers(t, 2, ms[0], ms[1])
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := ms[1].Client().Get(ctx, "kept")
		if err == nil && bytes.Equal(got, data) {
			break
		}
		if time.Now().After(deadline) || err != nil && !errors.Is(err, messages.ErrUnavailable) {
			t.Fatalf("after the failure: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case f := <-failed:
		t.Fatalf("NodeFailed twice: %+v", f)
	case <-time.After(200 * time.Millisecond):
	}
	if s := strings.Join(ms[0].liveIDs(), ","); strings.Contains(s, victim) {
		t.Fatalf("view still has the failed member: %s", s)
	}
}

func (m *Member) liveIDs() []string { return *m.live.Load() }
