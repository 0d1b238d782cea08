package shardactor

import (
	"bytes"
	"testing"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// decodeLocateReply decodes what proto.Unmarshal decodes, and an inline
// answer's bytes are the encoded buffer's own: no copy.
func TestDecodeLocateReplyAliasesTheInlineBytes(t *testing.T) {
	inline := bytes.Repeat([]byte("hoplite!"), 128)
	for _, want := range []*messages.LocateReply{
		{ObjectId: "x", Size: int64(len(inline)), Fingerprint: 7, HasInline: true, InlineData: inline, Epoch: 3, Attempt: 9,
			ProducedBy: "run", ReducedIds: []string{"a", "b"}},
		{ObjectId: "y", Size: 1 << 20, Sender: &messages.NodeRef{NodeId: "n1", DataAddress: "h:1"}, Attempt: 2},
		{ObjectId: "z", Error: messages.Errorf(messages.ErrorCode_TIMEOUT, "late")},
		{ObjectId: "first", HasInline: true, InlineData: []byte{1}}, // inline_data before any later field
		{},
	} {
		b, err := proto.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeLocateReply(b)
		if err != nil {
			t.Fatalf("%v: %v", want, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("decoded %v, want %v", got, want)
		}
		if n := len(got.GetInlineData()); n > 0 {
			if !within(got.GetInlineData(), b) {
				t.Fatalf("%q: the inline bytes were copied out of the encoded answer", want.GetObjectId())
			}
			if cap(got.GetInlineData()) != n {
				t.Fatalf("%q: the inline bytes reach past their end (cap %d of %d)", want.GetObjectId(), cap(got.GetInlineData()), n)
			}
		}
	}
}

// A field repeated on the wire decodes as protobuf decodes it: the last
// inline_data wins, every other field merges around it.
func TestDecodeLocateReplyRepeatedInline(t *testing.T) {
	var b []byte
	b = protowire.AppendTag(b, inlineDataField, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("old"))
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, "id")
	b = protowire.AppendTag(b, inlineDataField, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("new"))
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, 3)
	want := &messages.LocateReply{}
	if err := proto.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	got, err := decodeLocateReply(b)
	if err != nil || !proto.Equal(got, want) || string(got.GetInlineData()) != "new" {
		t.Fatalf("decoded %v, %v; want %v", got, err, want)
	}
}

// A malformed answer fails as proto.Unmarshal fails it.
func TestDecodeLocateReplyMalformed(t *testing.T) {
	good, _ := proto.Marshal(&messages.LocateReply{ObjectId: "x", HasInline: true, InlineData: []byte("abc"), Size: 3})
	for _, b := range [][]byte{
		good[:len(good)-1], // inline_data cut short
		{0x0a, 0x05, 'a'},  // object_id longer than the buffer
		{0xff},             // a truncated tag
		append(protowire.AppendTag(nil, inlineDataField, protowire.VarintType), 1), // the wrong wire type
	} {
		if r, err := decodeLocateReply(b); err == nil && proto.Unmarshal(b, &messages.LocateReply{}) != nil {
			t.Errorf("%x decoded as %v; proto.Unmarshal fails it", b, r)
		}
	}
	if _, err := decodeLocateReply(good[:len(good)-1]); err == nil {
		t.Error("a cut answer decoded")
	}
}

// within says whether p lies inside b's memory.
func within(p, b []byte) bool {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return at >= lo && at+uintptr(len(p)) <= lo+uintptr(len(b))
}
