package storeproto

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// An answer to a Locate that names no sender and carries no bytes (no
// shard sends one; FuzzFetchProtocol found the fetch streaming from
// nobody) is taken as a shard that could not answer: no stream starts,
// the fetch does not end, and it asks again after a backoff.
func TestLocatedWithoutASenderAsksAgain(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	self := &messages.NodeRef{NodeId: "me"}
	for _, into := range []bool{false, true} {
		var p *FetchProtocol
		if into {
			p = NewFetchIntoProtocol(FetchConfig{Self: self}, "x", 64, now.Add(time.Minute))
		} else {
			p = NewFetchProtocol(FetchConfig{Self: self}, "x", now.Add(time.Minute))
		}
		out := p.Step(now, FetchStart{State: ObjectState{Size: -1}})
		if out.Store.Kind == OpTakeWriter {
			out = p.Step(now, FetchStoreDone{Result: StoreResult{}, State: ObjectState{Size: -1}})
		}
		if p.Waiting() == "" || out.Done {
			t.Fatalf("into %v: the fetch did not ask the directory: %+v", into, out)
		}
		for _, loc := range []*messages.LocateReply{
			{ObjectId: "x", Size: 8, Attempt: p.Attempt()},
			{ObjectId: "x", Size: 8, Attempt: p.Attempt() + 1, Sender: &messages.NodeRef{Address: "h:1", ActorId: "a"}},
		} {
			loc.Attempt = p.Attempt()
			out = p.Step(now, FetchLocated{Reply: loc, State: ObjectState{Size: -1}})
			if out.Stream != nil || out.Done || out.Store.Kind != 0 {
				t.Fatalf("into %v: an answer naming no sender: %+v", into, out)
			}
			retry := false
			for _, tm := range out.Timers {
				if ft, ok := tm.Msg.(FetchTimer); ok && ft.Kind == TimerRetry {
					retry = true
					out = p.Step(tm.At, FetchTimed{Timer: ft, State: ObjectState{Size: -1}})
				}
			}
			if !retry {
				t.Fatalf("into %v: no retry after an answer naming no sender: %+v", into, out)
			}
		}
	}
}
