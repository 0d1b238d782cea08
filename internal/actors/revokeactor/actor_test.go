package revokeactor

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/messages"
)

// actorNet runs one broadcaster actor per member in one actor system; a
// member's broadcaster is "revoke-<id>".
type actorNet struct {
	t       *testing.T
	system  *actor.ActorSystem
	pids    map[string]*actor.PID
	mu      sync.Mutex
	got     map[string][]Delivery // deliveries by member
	panicAt map[string]*atomic.Int32
}

func newActorNet(t *testing.T, members []string) *actorNet {
	t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	n := &actorNet{t: t, system: actor.NewActorSystem(), pids: map[string]*actor.PID{},
		got: map[string][]Delivery{}, panicAt: map[string]*atomic.Int32{}}
	t.Cleanup(n.system.Shutdown)
	for _, m := range members {
		n.spawn(m, members, log)
	}
	return n
}

func (n *actorNet) spawn(m string, members []string, log *logrus.Logger) {
	n.t.Helper()
	crashes := new(atomic.Int32)
	n.mu.Lock()
	n.panicAt[m] = crashes
	n.mu.Unlock()
	props := NewActorProps(ActorConfig{
		Self: m,
		Peer: func(id string) *actor.PID { return n.system.NewLocalPID("revoke-" + id) },
		Deliver: func(_ actor.Context, d Delivery) {
			n.mu.Lock()
			n.got[m] = append(n.got[m], d)
			n.mu.Unlock()
			if crashes.Add(-1) >= 0 {
				panic("delivery crashed (test)")
			}
		},
		Log: logrus.NewEntry(log),
	})
	pid, err := n.system.Root.SpawnNamed(props, "revoke-"+m)
	if err != nil {
		n.t.Fatal(err)
	}
	n.mu.Lock()
	n.pids[m] = pid
	n.mu.Unlock()
	n.system.Root.Send(pid, &SetMembers{Members: members})
}

func (n *actorNet) deliveries(m string) []Delivery {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Delivery(nil), n.got[m]...)
}

// waitDelivered waits until every member in want delivered the notice
// about subject, then a little longer, and checks it was exactly once.
func (n *actorNet) waitDelivered(want []string, subject string) {
	n.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	count := func(m string) int {
		c := 0
		for _, d := range n.deliveries(m) {
			if d.Notice.Subject == subject {
				c++
			}
		}
		return c
	}
	for _, m := range want {
		for count(m) == 0 {
			if time.Now().After(deadline) {
				n.t.Fatalf("member %s never delivered the notice about %s", m, subject)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	time.Sleep(50 * time.Millisecond) // duplicates would have arrived by now
	for _, m := range want {
		if c := count(m); c != 1 {
			n.t.Fatalf("member %s delivered the notice about %s %d times", m, subject, c)
		}
	}
}

func memberNames(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = fmt.Sprintf("m%02d", i)
	}
	return out
}

func TestActorFloodsToEveryMember(t *testing.T) {
	members := memberNames(8)
	n := newActorNet(t, members)
	n.system.Root.Send(n.pids["m03"], &Originate{Notice: revoke.Notice{Subject: "x", Epoch: 1, SubjectAddress: "10.0.0.9:1"}})
	n.waitDelivered(members, "x")
	for _, m := range members {
		d := n.deliveries(m)[0]
		if d.Notice.SubjectAddress != "10.0.0.9:1" || d.Notice.Origin != "m03" {
			t.Fatalf("%s got %+v", m, d)
		}
		if (m == "m03") != (d.From == "") {
			t.Fatalf("%s: from %q", m, d.From)
		}
	}
}

// Stopped members stay in everybody's member list (nobody learned of
// them yet): sends to them fail, and the others still all deliver, as
// long as fewer than the overlay's degree are down.
func TestActorToleratesStoppedMembers(t *testing.T) {
	members := memberNames(8) // degree 5: up to 4 may be down
	n := newActorNet(t, members)
	down := []string{"m01", "m02", "m05", "m06"}
	for _, m := range down {
		if err := n.system.Root.StopFuture(n.pids[m]).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	var live []string
	for _, m := range members {
		if !contains(down, m) {
			live = append(live, m)
		}
	}
	n.system.Root.Send(n.pids["m00"], &Originate{Notice: revoke.Notice{Subject: "y"}})
	n.waitDelivered(live, "y")
}

// Two members that detect the same failure at once both originate: the
// waves merge, every member delivers once.
func TestActorConcurrentOriginsMerge(t *testing.T) {
	members := memberNames(6)
	n := newActorNet(t, members)
	nt := revoke.Notice{Subject: "z", Epoch: 4}
	n.system.Root.Send(n.pids["m00"], &Originate{Notice: nt})
	n.system.Root.Send(n.pids["m04"], &Originate{Notice: nt})
	n.waitDelivered(members, "z")
}

// A member that joins after a wave hears of it from the neighbours the
// new overlay gives it (SetOverlay's replay).
func TestActorReplaysToJoiner(t *testing.T) {
	members := memberNames(5)
	n := newActorNet(t, members)
	n.system.Root.Send(n.pids["m02"], &Originate{Notice: revoke.Notice{Subject: "w", SubjectAddress: "a:1"}})
	n.waitDelivered(members, "w")
	grown := append(append([]string(nil), members...), "m05")
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	n.spawn("m05", grown, log)
	for _, m := range members {
		n.system.Root.Send(n.pids[m], &SetMembers{Members: grown})
	}
	n.waitDelivered(grown, "w")
	if d := n.deliveries("m05")[0]; d.Notice.SubjectAddress != "a:1" {
		t.Fatalf("replayed copy lost the subject address: %+v", d)
	}
}

// A delivery that panics restarts the actor: the notice was forwarded
// first, so the others deliver; the crashed member does not deliver it a
// second time when more copies arrive; and it goes on working.
func TestActorSurvivesCrashingDelivery(t *testing.T) {
	members := memberNames(6)
	n := newActorNet(t, members)
	n.panicAt["m02"].Store(1)
	n.system.Root.Send(n.pids["m02"], &Originate{Notice: revoke.Notice{Subject: "p"}})
	n.waitDelivered(members, "p")
	n.system.Root.Send(n.pids["m02"], &messages.RevokeNotice{Subject: "p", From: "m03"})
	n.system.Root.Send(n.pids["m05"], &Originate{Notice: revoke.Notice{Subject: "q"}})
	n.waitDelivered(members, "q")
	n.waitDelivered([]string{"m02"}, "p")
}

// The subject of a notice is the failed member: it is sent no copy.
func TestActorSendsNothingToTheSubject(t *testing.T) {
	members := memberNames(6)
	n := newActorNet(t, members)
	n.system.Root.Send(n.pids["m00"], &Originate{Notice: revoke.Notice{Subject: "m03"}})
	var others []string
	for _, m := range members {
		if m != "m03" {
			others = append(others, m)
		}
	}
	n.waitDelivered(others, "m03")
	if d := n.deliveries("m03"); len(d) != 0 {
		t.Fatalf("the subject got its own failure notice: %v", d)
	}
}

// Malformed or foreign input is dropped, never a crash.
func TestActorDropsBadInput(t *testing.T) {
	members := memberNames(3)
	n := newActorNet(t, members)
	n.system.Root.Send(n.pids["m00"], &messages.RevokeNotice{})
	n.system.Root.Send(n.pids["m00"], &messages.RevokeNotice{Subject: "s", From: "nobody-we-know"})
	n.system.Root.Send(n.pids["m00"], &messages.Put{ObjectId: "x"})
	n.system.Root.Send(n.pids["m00"], &SetMembers{Members: []string{"", "m00", "m00"}})
	n.system.Root.Send(n.pids["m00"], &SetMembers{Members: members})
	n.waitDelivered(members, "s")
	if len(n.deliveries("m00")) != 1 {
		t.Fatalf("m00 delivered %v", n.deliveries("m00"))
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
