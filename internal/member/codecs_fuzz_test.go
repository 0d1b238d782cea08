package member

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/hoplite-go/hoplite/messages"
)

// codecTypes are the message types a member decodes from its peers
// (those warmCodecs builds), in a fixed order: the data plane's control
// requests and answers first, then every other one by name.
var codecTypes = func() []protoreflect.MessageType {
	first := []proto.Message{&messages.Locate{}, &messages.LocateReply{}, &messages.Get{}, &messages.GetReply{},
		&messages.SubscribeBatch{}, &messages.SubscribeAnswer{}}
	var types []protoreflect.MessageType
	for _, m := range first {
		types = append(types, m.ProtoReflect().Type())
	}
	var rest []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if isCodecType(mt) && !slices.ContainsFunc(first, func(m proto.Message) bool {
			return m.ProtoReflect().Descriptor().FullName() == mt.Descriptor().FullName()
		}) {
			rest = append(rest, mt)
		}
		return true
	})
	slices.SortFunc(rest, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	return append(types, rest...)
}()

// Every message a member decodes from a peer, the data plane's control
// requests first, decodes any bytes without a panic, fails what does not
// decode with an error, and what decodes encodes again to the same
// message.
func FuzzCodecs(f *testing.F) {
	for i, m := range []proto.Message{
		&messages.Locate{ObjectId: "x", Receiver: &messages.NodeRef{NodeId: "n"}, TimeoutMs: 1},
		&messages.LocateReply{ObjectId: "x", Size: 3, HasInline: true, InlineData: []byte("abc")},
		&messages.Get{ObjectId: "x", Prefetch: true, Pushed: true, PushedData: []byte("abc")},
		&messages.GetReply{ObjectId: "x", Error: messages.Errorf(messages.ErrorCode_LOST, "gone")},
		&messages.SubscribeBatch{Subscribes: []*messages.Subscribe{{ObjectId: "a", Subscriber: &messages.NodeRef{Address: "h", ActorId: "c"}}}},
		&messages.SubscribeAnswer{Updates: []*messages.LocationUpdate{{ObjectId: "a", Size: 1, HasInline: true, InlineData: []byte{1}}}},
	} {
		b, _ := proto.Marshal(m)
		f.Add(append([]byte{byte(i)}, b...))
	}
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{4, 0x0a, 0x80, 0x80, 0x80, 0x80, 0x08})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(codecTypes) == 0 {
			return
		}
		mt := codecTypes[int(b[0])%len(codecTypes)]
		m := mt.New().Interface()
		if err := proto.Unmarshal(b[1:], m); err != nil {
			return
		}
		again, err := proto.Marshal(m)
		if err != nil {
			// A string field that is not UTF-8 decodes only where the
			// field does not check it; it then does not encode either.
			return
		}
		back := mt.New().Interface()
		if err := proto.Unmarshal(again, back); err != nil || !proto.Equal(m, back) {
			t.Fatalf("%s: %x decoded to %v, which encodes to %x and decodes to %v (%v)", mt.Descriptor().FullName(), b[1:], m, again, back, err)
		}
	})
}
