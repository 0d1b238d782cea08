package shardactor

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// A deputy's batch is answered from the shard's published objects with
// the bytes once, however many Locates it answers, each answer with its
// own attempt; a Locate the table must see (a failed sender named) is
// listed as direct; a batch of an object not published here is all
// direct; and a batch that is empty, too long, of two objects or not
// protobuf is INVALID_ARGUMENT, one whose shard is elsewhere UNAVAILABLE.
func TestLocateBatchAnsweredWithTheBytesOnce(t *testing.T) {
	s := controlShard()
	n := &messages.NodeRef{NodeId: "n2"}
	ls := []*messages.Locate{
		{ObjectId: "good", Receiver: n, Attempt: 1},
		{ObjectId: "good", Receiver: n, Attempt: 2, FailedSender: s.creator},
		{ObjectId: "good", NoCopy: true, Attempt: 3},
	}
	req, _ := proto.Marshal(&messages.LocateBatch{Locates: ls})
	out, err := ServeLocateBatch(s.system, s.shardFor, req)
	if err != nil {
		t.Fatal(err)
	}
	if k := bytes.Count(out, []byte("abc")); k != 1 {
		t.Fatalf("the reply holds the object's bytes %d times, want once", k)
	}
	replies, direct, err := decodeLocateBatchReply(out, ls)
	if err != nil {
		t.Fatal(err)
	}
	if direct[0] || !direct[1] || direct[2] {
		t.Fatalf("direct %v, want only the Locate that names a failed sender", direct)
	}
	for _, i := range []int{0, 2} {
		if r := replies[i]; string(r.GetInlineData()) != "abc" || r.GetAttempt() != ls[i].GetAttempt() || !r.GetHasInline() {
			t.Fatalf("answer %d: %v", i, r)
		}
	}

	req, _ = proto.Marshal(&messages.LocateBatch{Locates: []*messages.Locate{{ObjectId: "absent", Receiver: n}}})
	out, err = ServeLocateBatch(s.system, s.shardFor, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, direct, err := decodeLocateBatchReply(out, []*messages.Locate{{ObjectId: "absent"}}); err != nil || !direct[0] {
		t.Fatalf("an object not published: direct %v, %v; want direct", direct, err)
	}

	long := make([]*messages.Locate, messages.MaxLocateBatch+1)
	for i := range long {
		long[i] = &messages.Locate{ObjectId: "good"}
	}
	for name, b := range map[string]*messages.LocateBatch{
		"empty":       {},
		"too long":    {Locates: long},
		"two objects": {Locates: []*messages.Locate{{ObjectId: "good"}, {ObjectId: "other"}}},
		"no id":       {Locates: []*messages.Locate{{}}},
	} {
		req, _ := proto.Marshal(b)
		if _, err := ServeLocateBatch(s.system, s.shardFor, req); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if _, err := ServeLocateBatch(s.system, s.shardFor, []byte{0xff}); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Errorf("not protobuf: %v, want INVALID_ARGUMENT", err)
	}
	req, _ = proto.Marshal(&messages.LocateBatch{Locates: []*messages.Locate{{ObjectId: "elsewhere"}}})
	if _, err := ServeLocateBatch(s.system, s.shardFor, req); !errors.Is(err, messages.ErrUnavailable) {
		t.Errorf("a shard elsewhere: %v, want UNAVAILABLE", err)
	}
	s.stillGood(t)
}

// A deputy decodes whatever a home answers a batch: an answer that does
// not answer its batch (a count, an object, an attempt, a size or a
// direct index that does not match) is UNAVAILABLE, never a panic, and a
// good one gives every answered Locate the shared bytes.
func FuzzDecodeLocateBatchReply(f *testing.F) {
	ls := []*messages.Locate{{ObjectId: "o", Attempt: 1}, {ObjectId: "o", Attempt: 2}}
	add := func(r *messages.LocateBatchReply) {
		b, _ := proto.Marshal(r)
		f.Add(b, uint8(2))
	}
	good := &messages.LocateReply{ObjectId: "o", HasInline: true, Size: 3, Attempt: 1}
	add(&messages.LocateBatchReply{InlineData: []byte("abc"), Replies: []*messages.LocateReply{good, {}}, Direct: []uint32{1}})
	add(&messages.LocateBatchReply{Replies: []*messages.LocateReply{{}, {}}, Direct: []uint32{0, 1}})
	add(&messages.LocateBatchReply{Replies: []*messages.LocateReply{{}, {}}, Direct: []uint32{0, 0}})
	add(&messages.LocateBatchReply{Replies: []*messages.LocateReply{{}, {}}, Direct: []uint32{7}})
	add(&messages.LocateBatchReply{InlineData: []byte("ab"), Replies: []*messages.LocateReply{good, good}})
	f.Add([]byte{0x0a, 0xff}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		batch := make([]*messages.Locate, n%8)
		for i := range batch {
			batch[i] = ls[i%2]
		}
		replies, direct, err := decodeLocateBatchReply(b, batch)
		typedError(t, "decodeLocateBatchReply", err)
		if err != nil {
			if !errors.Is(err, messages.ErrUnavailable) {
				t.Fatalf("decodeLocateBatchReply(%x): %v, want UNAVAILABLE", b, err)
			}
			return
		}
		if len(replies) != len(batch) || len(direct) != len(batch) {
			t.Fatalf("%d answers and %d direct for %d Locates", len(replies), len(direct), len(batch))
		}
		for i, r := range replies {
			if direct[i] != (r == nil) {
				t.Fatalf("answer %d: direct %v with %v", i, direct[i], r)
			}
			if r != nil && (r.GetAttempt() != batch[i].GetAttempt() || int64(len(r.GetInlineData())) != r.GetSize()) {
				t.Fatalf("answer %d does not answer its Locate: %v", i, r)
			}
		}
	})
}

// A member serves any peer's LocateBatch: whatever its bytes,
// ServeLocateBatch answers or fails with a typed error, an answer decodes
// as a LocateBatchReply that answers the batch, and the shard neither
// restarts nor stops answering good Locates.
func FuzzServeLocateBatch(f *testing.F) {
	n := &messages.NodeRef{NodeId: "n3"}
	for _, b := range []*messages.LocateBatch{
		{Locates: []*messages.Locate{{ObjectId: "good", Receiver: n}, {ObjectId: "good", NoCopy: true}}},
		{Locates: []*messages.Locate{{ObjectId: "good"}}},
		{Locates: []*messages.Locate{{ObjectId: "parked", Receiver: n}}},
		{Locates: []*messages.Locate{{ObjectId: "elsewhere"}}},
		{Locates: []*messages.Locate{{ObjectId: "none"}}},
		{Locates: []*messages.Locate{{ObjectId: "good", FailedSender: n}, {ObjectId: "good", Receiver: n}}},
	} {
		req, _ := proto.Marshal(b)
		f.Add(req)
	}
	f.Add([]byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, req []byte) {
		s := controlShard()
		out, err := ServeLocateBatch(s.system, s.shardFor, req)
		typedError(t, "ServeLocateBatch", err)
		if err == nil {
			var b messages.LocateBatch
			if proto.Unmarshal(req, &b) != nil {
				t.Fatalf("ServeLocateBatch(%x) answered a request that does not decode", req)
			}
			if _, _, err := decodeLocateBatchReply(out, b.GetLocates()); err != nil {
				t.Fatalf("ServeLocateBatch(%x) answered %x: %v", req, out, err)
			}
		}
		s.stillGood(t)
	})
}
