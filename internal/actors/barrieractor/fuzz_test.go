package barrieractor

import (
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/barrier/handle"
	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// fuzzInput reads a fuzz target's bytes as a program (testutil.FuzzInput).
type fuzzInput = testutil.FuzzInput

var fuzzHosts = []*actor.PID{
	actor.NewPID("m0:1", "node-0/barriers"), actor.NewPID("m1:1", "node-1/barriers"), actor.NewPID("m2:1", "node-2/barriers"),
}

// hostilePID is a sender a peer may be: a participant, another one, a
// replica's host, a PID at another address, or none.
func hostilePID(c byte) *actor.PID {
	switch c % 6 {
	case 0:
		return actor.NewPID("p:1", "participant-a")
	case 1:
		return actor.NewPID("p:2", "participant-b")
	case 2:
		return fuzzHosts[1]
	case 3:
		return actor.NewPID("evil:1", strings.Repeat("q", 4097))
	case 4:
		return nil
	}
	return actor.NewPID("", "")
}

var fuzzLabels = []string{"a", "b", "", strings.Repeat("l", 4097)}

// hostileU64 is an epoch, sequence number or request id a peer may send.
func hostileU64(c byte) uint64 {
	switch c % 5 {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return 2
	case 3:
		return 1<<64 - 1
	}
	return 1 << 63
}

func hostileRank(c byte) int32 {
	return []int32{0, 1, 2, 3, -1, -1 << 31, 1<<31 - 1}[int(c)%7]
}

// fuzzBarrierMessage builds one message a barrier manager takes, decoded
// from the input and, unless the input says not to, given hostile
// fields.
func fuzzBarrierMessage(in *fuzzInput) proto.Message {
	kind, raw := in.Byte(), in.Bytes()
	var m proto.Message
	switch kind % 15 {
	case 0:
		m = &messages.BarrierEnter{}
	case 1:
		m = &messages.BarrierRelease{}
	case 2:
		m = &messages.BarrierClose{}
	case 3:
		m = &messages.BarrierStatus{}
	case 4:
		m = &messages.BarrierDecide{}
	case 5:
		m = &messages.BarrierReplicate{}
	case 6:
		m = &messages.BarrierSyncRequest{}
	case 7:
		m = &messages.BarrierCloseAck{}
	case 8:
		m = &messages.BarrierHandover{}
	case 9:
		m = &messages.BarrierTreeEnter{}
	case 10:
		m = &messages.BarrierArrivals{}
	case 11:
		m = &messages.BarrierReleases{}
	case 12:
		m = &messages.BarrierEnters{}
	case 13:
		m = &messages.BarrierUndelivered{}
	default:
		m = &messages.BarrierCreate{}
	}
	if proto.Unmarshal(raw, m) != nil {
		proto.Reset(m)
	}
	if kind&0x10 == 0 {
		return m
	}
	label := fuzzLabels[int(in.Byte())%len(fuzzLabels)]
	u, rank := hostileU64(in.Byte()), hostileRank(in.Byte())
	op := &messages.BarrierOp{Kind: messages.BarrierOpKind(in.Byte() % 8), Label: label, Host: label,
		Reply: &messages.BarrierPeer{Address: "p:1", Id: "participant-a"}, AtUnixNano: int64(u), RequestId: u}
	switch m := m.(type) {
	case *messages.BarrierEnter:
		m.Name, m.Label, m.Host, m.RequestId, m.ToRank = "b", label, label, u, rank
	case *messages.BarrierRelease:
		m.Name, m.Label, m.RequestId, m.ToRank = "b", label, u, rank
	case *messages.BarrierClose:
		m.Name, m.RequestId, m.ToRank = "b", u, rank
	case *messages.BarrierStatus:
		m.Name, m.RequestId, m.ToRank = "b", u, rank
	case *messages.BarrierDecide:
		m.Name, m.Id, m.Fire = "b", u%4, kind&0x20 != 0
	case *messages.BarrierReplicate:
		m.Name, m.Epoch, m.FromRank, m.Seq = "b", u, rank, hostileU64(in.Byte())
		if kind&0x20 != 0 {
			m.Sync, m.Log = true, []*messages.BarrierOp{op, op, nil}
		} else {
			m.Op = op
		}
	case *messages.BarrierSyncRequest:
		m.Name, m.Epoch, m.FromRank = "b", u, rank
	case *messages.BarrierCloseAck:
		m.Name, m.Epoch, m.FromRank = "b", u, rank
	case *messages.BarrierHandover:
		m.Name, m.Epoch, m.FromRank, m.Ops = "b", u, rank, []*messages.BarrierOp{op, nil}
	case *messages.BarrierCreate:
		m.Name, m.Rank = "b", rank
	}
	return m
}

// stepReplica hands m to the replica as Manager.Receive does.
func stepReplica(r *replica.Replica, now time.Time, m proto.Message, from *actor.PID) replica.Effects {
	var ev any = m
	switch m := m.(type) {
	case *messages.BarrierCreate:
		ev = replica.Created{Req: m, From: from}
	case *messages.BarrierEnter:
		ev = replica.Enter{Req: m, From: from}
	case *messages.BarrierRelease:
		ev = replica.Release{Req: m, From: from}
	case *messages.BarrierClose:
		ev = replica.Close{Req: m, From: from}
	case *messages.BarrierStatus:
		ev = replica.Status{Req: m, From: from}
	}
	return r.Step(now, ev)
}

// A barrier manager takes its messages from any peer: whatever their
// fields (foreign and missing senders, ranks out of range, epochs and
// sequence numbers at the limits, 4 KiB labels, replicated logs in any
// order), no step of its replica panics, the replica's log stays
// bounded, and an acting primary that has not closed still answers a
// Status.
func FuzzBarrierReplica(f *testing.F) {
	enc := func(kind byte, m proto.Message) []byte {
		b, _ := proto.Marshal(m)
		return append([]byte{kind, byte(len(b))}, b...)
	}
	var seed []byte
	seed = append(seed, 0)
	seed = append(seed, enc(0, &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 1})...)
	seed = append(seed, 0, 0)
	seed = append(seed, enc(1, &messages.BarrierRelease{Name: "b", Label: "a", RequestId: 2})...)
	seed = append(seed, 0, 0)
	f.Add(seed)
	f.Add([]byte{1, 0x35, 0, 1, 3, 1, 2, 2, 0, 0, 0x18, 0, 1, 0, 3, 1, 0, 0, 0x12, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0x10, 0, 0, 1, 0, 0, 0, 0, 0x10, 0, 1, 2, 0, 0, 1, 0, 0x17, 0, 0, 1, 2, 0, 0, 0, 0x12, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := testutil.NewFuzzInput(data)
		now := time.Unix(1_700_000_000, 0)
		rank := int(in.Byte() % 3)
		opts := &messages.BarrierOptions{MaxParticipants: 2, TimeoutMs: 1000}
		r, _, err := replica.New(replica.Config{Name: "b", Options: opts, Replicas: fuzzHosts,
			Members: []string{"node-0", "node-1", "node-2"}, Rank: rank, Controller: actor.NewPID("c:1", "controller")}, now)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; in.More() && i < 64; i++ {
			m := fuzzBarrierMessage(in)
			stepReplica(r, now, m, hostilePID(in.Byte()))
			switch c := in.Byte(); c % 4 {
			case 0:
				now = now.Add(time.Duration(c) * 10 * time.Millisecond)
				r.Step(now, replica.Wake{At: r.NextWake()})
			case 1:
				r.Step(now, replica.ParticipantDown{PID: hostilePID(c >> 2)})
			case 2:
				r.Step(now, replica.MemberDown{Member: []string{"node-0", "node-1", "node-2", ""}[c>>2%4], Address: "m1:1"})
			}
			if n := r.LogLen(); n > 8*2+64+8 {
				t.Fatalf("the replica's log holds %d ops", n)
			}
		}
		if !r.Acting() || r.Closed() {
			return
		}
		asker := actor.NewPID("p:9", "asker")
		e := r.Step(now, replica.Status{Req: &messages.BarrierStatus{Name: "b", RequestId: 77}, From: asker})
		for _, s := range e.Sends {
			if s.To == asker {
				return
			}
		}
		for _, s := range r.Step(now.Add(time.Hour), replica.Wake{At: r.NextWake()}).Sends {
			if s.To == asker {
				return
			}
		}
		t.Fatalf("the acting primary did not answer a Status: %v", e.Sends)
	})
}

// A participant takes its replicas' answers and a barrier's outcomes from
// any process: whatever their fields (ranks out of range, request ids
// and labels of nobody's calls, any error), its core does not panic,
// answers each Enter at most once, and an Enter after them still ends
// when its barrier fires.
func FuzzBarrierParticipant(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 1, 1, 1, 0, 2, 2, 0, 1, 3, 0, 0, 2})
	f.Add([]byte{4, 1, 2, 3, 5, 0, 0, 0, 6, 0, 1, 5, 0, 4, 4, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := testutil.NewFuzzInput(data)
		p := handle.New("b")
		p.Setup(3, 4, in.Byte()%2 == 0)
		now := time.Unix(1_700_000_000, 0)
		answered := map[uint64]int{}
		count := func(s handle.Step) {
			for _, a := range s.Enters {
				answered[a.ID]++
				if answered[a.ID] > 1 {
					t.Fatalf("Enter %d answered %d times", a.ID, answered[a.ID])
				}
			}
		}
		count(p.Step(now, handle.Enter{ID: 1, Label: "a", Host: "h"}))
		count(p.Step(now, handle.Enter{ID: 2, Label: "b", Host: "h"}))
		next := uint64(9)
		for i := 0; in.More() && i < 64; i++ {
			label := fuzzLabels[int(in.Byte())%len(fuzzLabels)]
			id, rank := hostileU64(in.Byte())%4, hostileRank(in.Byte())
			err := []*messages.Error{nil, messages.Errorf(messages.ErrorCode_NOT_FOUND, "x"), messages.Errorf(messages.ErrorCode_DELETED, "x"),
				messages.Errorf(messages.ErrorCode_CONFLICT, "x"), messages.Errorf(messages.ErrorCode(99), "x")}[int(in.Byte())%5]
			switch in.Byte() % 8 {
			case 0:
				count(p.Step(time.Time{}, &messages.BarrierRefused{Name: "b", Label: label, RequestId: id, FromRank: rank, Error: err}))
			case 1:
				count(p.Step(time.Time{}, handle.Answered{ID: id, Msg: &messages.BarrierReleased{Name: "b", Label: label, RequestId: id, FromRank: rank, Error: err, LostState: rank%2 == 0}}))
			case 2:
				count(p.Step(time.Time{}, handle.Answered{ID: id, Msg: &messages.BarrierClosed{Name: "b", RequestId: id, FromRank: rank, Error: err}}))
			case 3:
				count(p.Step(time.Time{}, handle.Answered{ID: id, Msg: &messages.BarrierStatusReply{Name: "b", RequestId: id, FromRank: rank, Error: err}}))
			case 4:
				count(p.Step(time.Time{}, handle.Passed{Label: label, Kind: handle.Outcome(in.Byte() % 4), Reason: "r"}))
			case 5:
				now = now.Add(handle.ReaskEvery)
				count(p.Step(now, handle.Reask{}))
			case 6:
				p.Cancel(id, label)
			default:
				// A handle numbers its calls itself: each Enter is new.
				next++
				count(p.Step(now, handle.Enter{ID: next, Label: label, Host: "h"}))
			}
		}
		count(p.Step(now, handle.Enter{ID: 99, Label: "fresh", Host: "h"}))
		count(p.Step(time.Time{}, handle.Passed{Label: "fresh", Kind: handle.Fired, Reason: "max"}))
		if answered[99] != 1 {
			t.Fatalf("an Enter after the fuzzed answers was answered %d times when its barrier fired", answered[99])
		}
	})
}
