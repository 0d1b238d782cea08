package barrieractor

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// hostRig is a barrier host in an actor system of its own, holding a
// barrier "keep" created before any fuzzed message; restarts counts its
// managers' restarts, keepClosed says an input closed "keep" (a fuzzed
// Close may).
type hostRig struct {
	system     *actor.ActorSystem
	host       *actor.PID
	restarts   atomic.Int32
	fresh      atomic.Int32
	keepClosed atomic.Bool
}

var barrierHost = sync.OnceValue(func() *hostRig {
	r := &hostRig{system: actor.NewActorSystem()}
	log := logrus.New()
	log.SetOutput(io.Discard)
	var err error
	// Tombstones: 64, so that a run forgets a closed "keep" within a
	// few hundred inputs rather than 4,096 (the default).
	r.host, err = r.system.Root.SpawnNamed(NewHostProps(HostConfig{Log: logrus.NewEntry(log), MaxBarriers: 64, Tombstones: 64,
		BeforeReceive: func(_ string, m any) {
			if _, ok := m.(*actor.Restarting); ok {
				r.restarts.Add(1)
			}
		}}), "node-0/barriers")
	if err != nil {
		panic(err)
	}
	if res, err := r.ask(r.create("keep")); err != nil || res.(*messages.BarrierCreated).GetError() != nil {
		panic(fmt.Sprintf("create keep: %v, %v", res, err))
	}
	return r
})

func (r *hostRig) create(name string) *messages.BarrierCreate {
	return &messages.BarrierCreate{Name: name, Options: &messages.BarrierOptions{MaxParticipants: 2, TimeoutMs: 60_000},
		Replicas: []*messages.BarrierPeer{{Address: r.host.GetAddress(), Id: r.host.GetId()}}, ReplicaMembers: []string{"node-0"}}
}

func (r *hostRig) ask(m proto.Message) (any, error) {
	return r.system.Root.RequestFuture(r.host, m, 10*time.Second).Result()
}

// A barrier host takes creates, entries, releases, closes, statuses and
// the replicas' messages from any process, with any fields: no manager
// restarts, nothing answers INTERNAL, the barrier it held before still
// answers, and a new one is created and answers.
func FuzzBarrierHost(f *testing.F) {
	f.Add([]byte{9, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0})
	f.Add([]byte{0x19, 0, 1, 1, 1, 1, 0x10, 0, 0, 0, 0, 0, 0x15, 0, 0, 3, 4, 2, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := barrierHost()
		in := testutil.NewFuzzInput(data)
		for i := 0; in.More() && i < 8; i++ {
			m := fuzzBarrierMessage(in)
			switch c := in.Byte(); {
			case c%3 == 0:
				setName(m, "keep")
			case c%3 == 1:
				if bc, ok := m.(*messages.BarrierCreate); ok {
					good := r.create(fmt.Sprintf("f-%d", c))
					bc.Replicas, bc.ReplicaMembers = good.GetReplicas(), good.GetReplicaMembers()
				}
				r.placeHere(m, int(c/3))
			}
			res, err := r.system.Root.RequestFuture(r.host, m, 5*time.Millisecond).Result()
			if err != nil {
				continue
			}
			if e, ok := res.(interface{ GetError() *messages.Error }); ok && e.GetError().GetCode() == messages.ErrorCode_INTERNAL {
				t.Fatalf("%T %v answered %v", m, m, res)
			}
		}
		if n := r.restarts.Load(); n != 0 {
			t.Fatalf("%d barrier managers restarted", n)
		}
		// "keep" answers, or answers DELETED once a fuzzed Close closed
		// it; after that the host's bounded tombstones forget it as the
		// inputs' own barriers close (every input closes one), and it
		// answers NOT_FOUND. A NOT_FOUND with no DELETED before it is a
		// barrier lost.
		res, err := r.ask(&messages.BarrierStatus{Name: "keep", RequestId: 1})
		s, ok := res.(*messages.BarrierStatusReply)
		switch code := s.GetError().GetCode(); {
		case err != nil || !ok:
			t.Fatalf("the barrier held before the fuzzed messages: %v, %v", res, err)
		case s.GetError() == nil:
		case code == messages.ErrorCode_DELETED:
			r.keepClosed.Store(true)
		case code == messages.ErrorCode_NOT_FOUND && r.keepClosed.Load():
		default:
			t.Fatalf("the barrier held before the fuzzed messages: %v, %v", res, err)
		}
		name := fmt.Sprintf("fresh-%d", r.fresh.Add(1))
		res, err = r.ask(r.create(name))
		if c, ok := res.(*messages.BarrierCreated); err != nil || !ok || (c.GetError() != nil && c.GetError().GetCode() != messages.ErrorCode_CAPACITY) {
			t.Fatalf("a new barrier after the fuzzed messages: %v, %v", res, err)
		}
		if c := res.(*messages.BarrierCreated); c.GetError() == nil {
			if _, err := r.ask(&messages.BarrierClose{Name: name, RequestId: 2}); err != nil {
				t.Fatalf("close %s: %v", name, err)
			}
		}
	})
}

// placeHere puts the host in a fuzzed tree message's shape, at position
// at of the hosts, and makes it the replica: the host takes the place
// and steps its position with the rest of the fuzzed fields.
func (r *hostRig) placeHere(m proto.Message, at int) {
	var shape *messages.BarrierTreeShape
	switch t := m.(type) {
	case *messages.BarrierTreeEnter:
		if t.Shape == nil {
			t.Shape = &messages.BarrierTreeShape{}
		}
		shape = t.Shape
	case *messages.BarrierArrivals:
		if t.Shape == nil {
			t.Shape = &messages.BarrierTreeShape{}
		}
		shape = t.Shape
	default:
		return
	}
	self := &messages.BarrierPeer{Address: r.host.GetAddress(), Id: r.host.GetId()}
	if n := len(shape.Hosts); n > 0 {
		shape.Hosts[at%n] = self
	} else {
		shape.Hosts = []*messages.BarrierPeer{self, {Address: "nowhere:1", Id: "x/barriers"}}
	}
	shape.Replicas = []*messages.BarrierPeer{self}
}

// setName sets the barrier a fuzzed message names.
func setName(m proto.Message, name string) {
	fd := m.ProtoReflect().Descriptor().Fields().ByName("name")
	if fd != nil {
		m.ProtoReflect().Set(fd, protoreflect.ValueOfString(name))
	}
}
