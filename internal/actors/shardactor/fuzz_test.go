package shardactor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// decodeLocateReply decodes what proto.Unmarshal decodes and fails what
// it fails, whatever the bytes: an answer from another member never
// panics the member that asked.
func FuzzDecodeLocateReply(f *testing.F) {
	for _, r := range []*messages.LocateReply{
		{ObjectId: "x", Size: 3, HasInline: true, InlineData: []byte("abc"), Epoch: 3, Attempt: 9, ReducedIds: []string{"a"}},
		{ObjectId: "y", Size: 1 << 20, Sender: &messages.NodeRef{NodeId: "n1", DataAddress: "h:1"}},
		{ObjectId: "z", Error: messages.Errorf(messages.ErrorCode_TIMEOUT, "late")},
	} {
		b, _ := proto.Marshal(r)
		f.Add(b)
	}
	f.Add([]byte{0x32, 0x03, 'a', 'b', 'c', 0x32, 0x01, 'z'})
	f.Add([]byte{0x32, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeLocateReply(b)
		want := &messages.LocateReply{}
		werr := proto.Unmarshal(b, want)
		if (err == nil) != (werr == nil) {
			t.Fatalf("decodeLocateReply(%x): %v; proto.Unmarshal: %v", b, err, werr)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("decodeLocateReply(%x) = %v, proto.Unmarshal %v", b, got, want)
		}
	})
}

// controlShard is one shard, in an actor system of its own, that the
// data plane's fuzz targets hand their requests to; restarts counts its
// restarts (a panic in its Receive). Built once per process.
var controlShard = sync.OnceValue(func() *fuzzShard {
	system := actor.NewActorSystem()
	s := &fuzzShard{system: system}
	system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*events.ShardRebuilt); ok {
			s.restarts.Add(1)
		}
	})
	var err error
	if s.pid, err = system.Root.SpawnNamed(NewShardProps(ShardConfig{}), "fuzz-shard"); err != nil {
		panic(err)
	}
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	s.creator = &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	res, err := system.Root.RequestFuture(s.pid, &messages.CreateObject{ObjectId: "good", Size: 3, Creator: s.creator,
		HasInline: true, InlineData: []byte("abc")}, 5*time.Second).Result()
	if r, ok := res.(*messages.CreateObjectReply); err != nil || !ok || r.GetError() != nil {
		panic("create good: " + err.Error())
	}
	return s
})

type fuzzShard struct {
	system   *actor.ActorSystem
	pid      *actor.PID
	creator  *messages.NodeRef
	restarts atomic.Int32
	fresh    atomic.Int32
}

func (s *fuzzShard) shardFor(id string) *actor.PID {
	if strings.HasPrefix(id, "elsewhere") {
		return actor.NewPID("other:1", "shard")
	}
	if strings.HasPrefix(id, "none") {
		return nil
	}
	return s.pid
}

// stillGood checks that the shard did not restart and still answers a
// good Locate on the data plane with the inline object's bytes.
func (s *fuzzShard) stillGood(t *testing.T) {
	t.Helper()
	if n := s.restarts.Load(); n != 0 {
		t.Fatalf("the shard restarted %d times", n)
	}
	req, _ := proto.Marshal(&messages.Locate{ObjectId: "good", Receiver: &messages.NodeRef{NodeId: "n2"}, TimeoutMs: 5000})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := ServeLocate(ctx, s.system.Root, s.shardFor, req)
	var r messages.LocateReply
	if err != nil || proto.Unmarshal(b, &r) != nil || !bytes.Equal(r.GetInlineData(), []byte("abc")) {
		t.Fatalf("a good Locate after the fuzzed request: %v, %v", &r, err)
	}
}

// typedError fails the test unless err is nil or an *messages.Error.
func typedError(t *testing.T, what string, err error) {
	t.Helper()
	var e *messages.Error
	if err != nil && !errors.As(err, &e) {
		t.Fatalf("%s: untyped error %T %v", what, err, err)
	}
	if e != nil && e.GetCode() == messages.ErrorCode_INTERNAL {
		t.Fatalf("%s: INTERNAL %v", what, err)
	}
}

// A member serves the data plane's Locates, SubscribeBatches,
// CreateObjects and DeleteObjects of any peer: whatever their bytes,
// ServeLocate, ServeSubscribe, ServeCreate and ServeDelete answer or
// fail with a typed error, a request that does not decode or names no
// object is INVALID_ARGUMENT, and the shard neither restarts nor stops
// answering good Locates.
func FuzzServeControl(f *testing.F) {
	add := func(kind byte, m proto.Message) {
		b, _ := proto.Marshal(m)
		f.Add(append([]byte{kind}, b...))
	}
	n := &messages.NodeRef{NodeId: "n3", Address: "nonhost", ActorId: "n3/store"}
	add(0, &messages.Locate{ObjectId: "good", Receiver: n, TimeoutMs: 1})
	add(0, &messages.Locate{ObjectId: "good", Receiver: n, FailedSender: &messages.NodeRef{NodeId: "n1"}, FailedSenderLacks: true})
	add(0, &messages.Locate{ObjectId: "parked", Receiver: n, TimeoutMs: -1, NoCopy: true})
	add(0, &messages.Locate{ObjectId: "elsewhere", Receiver: n})
	add(0, &messages.Locate{ObjectId: "good", Receiver: n, NoCopy: true, TimeoutMs: 1})
	add(0, &messages.Locate{ObjectId: "good", TimeoutMs: 1})
	add(1, &messages.SubscribeBatch{Subscribes: []*messages.Subscribe{{ObjectId: "good", Subscriber: n}, {ObjectId: "x", Subscriber: n, LocatedBefore: true}}})
	add(1, &messages.SubscribeBatch{Subscribes: []*messages.Subscribe{{ObjectId: "none", Subscriber: n}}})
	add(1, &messages.SubscribeBatch{Subscribes: []*messages.Subscribe{{ObjectId: strings.Repeat("y", 5000), Subscriber: n}}})
	add(2, &messages.CreateObject{ObjectId: "fresh", Size: 8, Creator: n})
	add(2, &messages.CreateObject{ObjectId: "good", Size: -1, Creator: &messages.NodeRef{}})
	add(3, &messages.DeleteObject{ObjectId: "fresh", RequestId: 4})
	add(3, &messages.DeleteObject{ObjectId: "none"})
	add(3, &messages.DeleteObject{ObjectId: "elsewhere"})
	f.Add([]byte{3, 0x0a, 0x00})
	f.Add([]byte{0, 0xff})
	f.Add([]byte{1, 0x0a, 0x00})
	f.Add([]byte{2, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		s := controlShard()
		// Short: a Locate of an object that does not exist parks until
		// the deadline, and its answer is then TIMEOUT.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
		defer cancel()
		req := b[1:]
		switch b[0] % 4 {
		case 0:
			out, err := ServeLocate(ctx, s.system.Root, s.shardFor, req)
			typedError(t, "ServeLocate", err)
			var l messages.Locate
			if proto.Unmarshal(req, &l) != nil || l.GetObjectId() == "" {
				if !errors.Is(err, messages.ErrInvalidArgument) {
					t.Fatalf("ServeLocate(%x): %v, want INVALID_ARGUMENT", req, err)
				}
			}
			if err == nil && proto.Unmarshal(out, &messages.LocateReply{}) != nil {
				t.Fatalf("ServeLocate(%x) answered %x, which does not decode", req, out)
			}
			// The object id read alone is the one protobuf reads.
			if id, ok := locateObjectID(req); ok && proto.Unmarshal(req, &l) == nil && id != l.GetObjectId() {
				t.Fatalf("locateObjectID(%x) = %q, protobuf reads %q", req, id, l.GetObjectId())
			}
			// The same bytes on the quick path: answered only with a
			// published object's bytes, never by a wait.
			out, ok := TryServeLocate(s.system, s.shardFor, req, nil)
			var r messages.LocateReply
			if ok && (proto.Unmarshal(out, &r) != nil || !r.GetHasInline() || r.GetObjectId() != "good") {
				t.Fatalf("TryServeLocate(%x) answered %x", req, out)
			}
		case 1:
			out, err := ServeSubscribe(ctx, s.system.Root, s.shardFor, req)
			typedError(t, "ServeSubscribe", err)
			var batch messages.SubscribeBatch
			if proto.Unmarshal(req, &batch) != nil || len(batch.GetSubscribes()) == 0 {
				if !errors.Is(err, messages.ErrInvalidArgument) {
					t.Fatalf("ServeSubscribe(%x): %v, want INVALID_ARGUMENT", req, err)
				}
			}
			if err == nil && proto.Unmarshal(out, &messages.SubscribeAnswer{}) != nil {
				t.Fatalf("ServeSubscribe(%x) answered %x, which does not decode", req, out)
			}
		case 3:
			var d messages.DeleteObject
			if proto.Unmarshal(req, &d) == nil && d.GetObjectId() == "good" {
				return // the shard every input shares keeps its one good object
			}
			out, err := ServeDelete(ctx, s.system.Root, s.shardFor, req)
			typedError(t, "ServeDelete", err)
			if proto.Unmarshal(req, &d) != nil || d.GetObjectId() == "" {
				if !errors.Is(err, messages.ErrInvalidArgument) {
					t.Fatalf("ServeDelete(%x): %v, want INVALID_ARGUMENT", req, err)
				}
			}
			if err == nil && proto.Unmarshal(out, &messages.DeleteObjectReply{}) != nil {
				t.Fatalf("ServeDelete(%x) answered %x, which does not decode", req, out)
			}
		default:
			out, err := ServeCreate(ctx, s.system.Root, s.shardFor, req)
			typedError(t, "ServeCreate", err)
			var c messages.CreateObject
			if proto.Unmarshal(req, &c) != nil || c.GetObjectId() == "" {
				if !errors.Is(err, messages.ErrInvalidArgument) {
					t.Fatalf("ServeCreate(%x): %v, want INVALID_ARGUMENT", req, err)
				}
			}
			if err == nil && proto.Unmarshal(out, &messages.CreateObjectReply{}) != nil {
				t.Fatalf("ServeCreate(%x) answered %x, which does not decode", req, out)
			}
		}
		s.stillGood(t)
	})
}

// fuzzInput reads a fuzz target's bytes as a program (testutil.FuzzInput).
type fuzzInput = testutil.FuzzInput

var (
	hostileStrings = []string{"", "a", "t", strings.Repeat("x", 4097), "\x00reduce/r/0/1", "t#c.n", "elsewhere"}
	hostileInts    = []int64{0, -1, -1 << 63, 1<<63 - 1, 3, 1 << 40, 1<<31 - 1, -1 << 31}
	hostileFloats  = []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1), 1e308}
)

// hostileNodeRef is a NodeRef a peer may name: nil fields, another
// address, an actor that is no store node, 4 KiB ids.
func hostileNodeRef(c byte) *messages.NodeRef {
	switch c % 5 {
	case 0:
		return &messages.NodeRef{NodeId: "n1", Address: "nonhost", ActorId: "n1/store"}
	case 1:
		return &messages.NodeRef{NodeId: "n1", Address: "elsewhere:1", ActorId: "n1/store"}
	case 2:
		return &messages.NodeRef{}
	case 3:
		return &messages.NodeRef{NodeId: strings.Repeat("n", 4097), Address: "evil:1", ActorId: "$1"}
	}
	return &messages.NodeRef{NodeId: "n9", Address: "nonhost", ActorId: "fuzz-shard"}
}

// hostile sets fields of m, each chosen by the input, to values a peer
// may send: every kind of field, nested messages too (NodeRefs become
// hostile ones), and repeated fields grow.
func hostile(in *fuzzInput, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		c := in.Byte()
		if c%3 != 0 {
			continue // as decoded
		}
		c >>= 2
		if fd.IsMap() {
			continue
		}
		if fd.IsList() {
			l := m.Mutable(fd).List()
			for range int(c%3) + 1 {
				switch fd.Kind() {
				case protoreflect.StringKind:
					l.Append(protoreflect.ValueOfString(hostileStrings[int(in.Byte())%len(hostileStrings)]))
				case protoreflect.MessageKind:
					if depth < 2 {
						e := l.NewElement()
						hostile(in, e.Message(), depth+1)
						l.Append(e)
					}
				case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
					l.Append(protoreflect.ValueOfInt32(int32(hostileInts[int(in.Byte())%len(hostileInts)])))
				}
			}
			continue
		}
		switch fd.Kind() {
		case protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(hostileStrings[int(c)%len(hostileStrings)]))
		case protoreflect.BytesKind:
			m.Set(fd, protoreflect.ValueOfBytes(make([]byte, []int{0, 3, 64, 5000}[c%4])))
		case protoreflect.BoolKind:
			m.Set(fd, protoreflect.ValueOfBool(c%2 == 0))
		case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
			m.Set(fd, protoreflect.ValueOfInt32(int32(hostileInts[int(c)%len(hostileInts)])))
		case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
			m.Set(fd, protoreflect.ValueOfInt64(hostileInts[int(c)%len(hostileInts)]))
		case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
			m.Set(fd, protoreflect.ValueOfUint32(uint32(hostileInts[int(c)%len(hostileInts)])))
		case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
			m.Set(fd, protoreflect.ValueOfUint64(uint64(hostileInts[int(c)%len(hostileInts)])))
		case protoreflect.DoubleKind:
			m.Set(fd, protoreflect.ValueOfFloat64(hostileFloats[int(c)%len(hostileFloats)]))
		case protoreflect.FloatKind:
			m.Set(fd, protoreflect.ValueOfFloat32(float32(hostileFloats[int(c)%len(hostileFloats)])))
		case protoreflect.EnumKind:
			m.Set(fd, protoreflect.ValueOfEnum(protoreflect.EnumNumber(int32(c)-8)))
		case protoreflect.MessageKind:
			switch {
			case fd.Message().FullName() == "hoplite.NodeRef":
				if c%6 == 5 {
					m.Clear(fd)
				} else {
					m.Set(fd, protoreflect.ValueOfMessage(hostileNodeRef(c).ProtoReflect()))
				}
			case c%4 == 0:
				m.Clear(fd)
			case depth < 2:
				hostile(in, m.Mutable(fd).Message(), depth+1)
			}
		}
	}
}

// shardMessages are the messages a directory shard takes from other
// processes.
var shardMessages = []proto.Message{
	&messages.CreateObject{}, &messages.PublishLocation{}, &messages.UnpublishLocation{}, &messages.ReportLost{},
	&messages.RepublishDone{}, &messages.Locate{}, &messages.CancelLocate{}, &messages.FetchDone{}, &messages.FetchAborted{},
	&messages.DeleteObject{}, &messages.Tombstones{}, &messages.Subscribe{}, &messages.Unsubscribe{}, &messages.QueryObject{},
	&messages.ListObjects{}, &messages.StartReduce{}, &messages.ReleaseTarget{}, &messages.NodeStatusReply{},
}

// actorShard is a shard, in an actor system of its own, whose
// coordinators answer at once and stop; restarts counts its restarts.
var actorShard = sync.OnceValue(func() *fuzzShard {
	system := actor.NewActorSystem()
	s := &fuzzShard{system: system}
	system.EventStream.Subscribe(func(ev any) {
		if _, ok := ev.(*events.ShardRebuilt); ok {
			s.restarts.Add(1)
		}
	})
	cfg := ShardConfig{NewCoordinator: func(id string, start *messages.StartReduce, requester *actor.PID, _ func() bool) *actor.Props {
		return actor.PropsFromFunc(func(ctx actor.Context) {
			if _, ok := ctx.Message().(*actor.Started); ok {
				if requester != nil {
					ctx.Send(requester, &messages.ReduceReply{TargetId: start.GetReduce().GetTargetId()})
				}
				ctx.Send(ctx.Parent(), &messages.ReleaseTarget{TargetId: start.GetReduce().GetTargetId(), ReduceId: id})
				ctx.Stop(ctx.Self())
			}
		})
	}}
	var err error
	if s.pid, err = system.Root.SpawnNamed(NewShardProps(cfg), "fuzz-shard"); err != nil {
		panic(err)
	}
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	s.creator = &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	return s
})

// A directory shard takes any of its messages from any process, with any
// fields: it does not restart (its table would be lost), a request that
// has an answer is never answered INTERNAL, and a Put and Get of a new
// object still work after them.
func FuzzShard(f *testing.F) {
	for i, m := range []proto.Message{
		&messages.CreateObject{ObjectId: "a", Size: 3, Creator: &messages.NodeRef{NodeId: "n1"}, HasInline: true, InlineData: []byte("abc")},
		&messages.Locate{ObjectId: "a", Receiver: &messages.NodeRef{NodeId: "n2"}, FailedSender: &messages.NodeRef{NodeId: "n1"}, FailedSenderLacks: true},
		&messages.StartReduce{Reduce: &messages.Reduce{TargetId: "t", SourceIds: []string{"a", "b"}, NumObjects: 2, Op: messages.ReduceOp_SUM,
			Dtype: messages.DType_INT64, TimeoutMs: 1000}},
	} {
		b, _ := proto.Marshal(m)
		kind := []byte{0, 5, 15}[i]
		f.Add(append([]byte{kind, byte(len(b))}, b...))
		f.Add(append([]byte{kind, byte(len(b))}, append(b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)...))
	}
	f.Add([]byte{4, 0, 0, 0, 17, 0, 0, 0, 0, 10, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		s := actorShard()
		in := testutil.NewFuzzInput(data)
		for i := 0; in.More() && i < 8; i++ {
			mt := shardMessages[int(in.Byte())%len(shardMessages)]
			m := mt.ProtoReflect().New().Interface()
			if proto.Unmarshal(in.Bytes(), m) != nil {
				proto.Reset(m)
			}
			hostile(in, m.ProtoReflect(), 0)
			res, err := s.system.Root.RequestFuture(s.pid, m, 5*time.Millisecond).Result()
			if err != nil {
				continue // no answer, or a parked one
			}
			if e, ok := res.(interface{ GetError() *messages.Error }); ok && e.GetError().GetCode() == messages.ErrorCode_INTERNAL {
				t.Fatalf("%T %v answered %v", m, m, res)
			}
		}
		s.stillWorks(t)
	})
}

// stillWorks checks that the shard did not restart and that a new object
// is created and located.
func (s *fuzzShard) stillWorks(t *testing.T) {
	t.Helper()
	if n := s.restarts.Load(); n != 0 {
		t.Fatalf("the shard restarted %d times", n)
	}
	id := fmt.Sprintf("fresh-%d", s.fresh.Add(1))
	res, err := s.system.Root.RequestFuture(s.pid, &messages.CreateObject{ObjectId: id, Size: 3, Creator: s.creator,
		HasInline: true, InlineData: []byte("abc")}, 10*time.Second).Result()
	if r, ok := res.(*messages.CreateObjectReply); err != nil || !ok || r.GetError() != nil {
		t.Fatalf("a good CreateObject after the fuzzed messages: %v, %v", res, err)
	}
	res, err = s.system.Root.RequestFuture(s.pid, &messages.Locate{ObjectId: id, Receiver: &messages.NodeRef{NodeId: "n2"}, TimeoutMs: 5000}, 10*time.Second).Result()
	if r, ok := res.(*messages.LocateReply); err != nil || !ok || !bytes.Equal(r.GetInlineData(), []byte("abc")) {
		t.Fatalf("a good Locate after the fuzzed messages: %v, %v", res, err)
	}
}
