package locatedeputy

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

var t0 = time.Unix(1000, 0)

var (
	inlineReply = &messages.LocateReply{HasInline: true}
	senderReply = &messages.LocateReply{Sender: &messages.NodeRef{NodeId: "s"}}
)

// The rule through an inline object's life: the first Locate alone, the
// next queued for the probe's answer, which brings the bytes and sends
// the queue as a batch; later ones wait the window; a batch the home
// left part of has the object's Locates go alone for StreamedFor.
func TestRuleBatchesAnInlineObject(t *testing.T) {
	var o Object
	if alone, _, _ := o.Arrive(t0); !alone {
		t.Fatal("the first Locate was queued")
	}
	if alone, wait, flush := o.Arrive(t0); alone || wait != WaitProbe || flush {
		t.Fatalf("the second: alone %v, wait %v, flush %v; want queued for the probe", alone, wait, flush)
	}
	if _, wait, _ := o.Arrive(t0); wait != NoWait {
		t.Fatalf("the third asked for a wait of its own (%v)", wait)
	}
	if !o.AloneAnswered(t0, inlineReply, true) {
		t.Fatal("the probe's inline answer did not send the queue")
	}
	if n, batch := o.Flush(t0); n != 2 || !batch {
		t.Fatalf("flush: %d, batch %v; want 2 in a batch", n, batch)
	}
	if alone, wait, _ := o.Arrive(t0); alone || wait != WaitWindow {
		t.Fatalf("with a batch out: alone %v, wait %v; want the window", alone, wait)
	}
	o.BatchAnswered(t0, 2, true)
	if n, batch := o.Flush(t0); n != 1 || batch {
		t.Fatalf("after the home left one: %d, batch %v; want 1 alone", n, batch)
	}
	o.SentAlone()
	if alone, _, _ := o.Arrive(t0.Add(time.Millisecond)); !alone {
		t.Fatal("a Locate while the object streams was queued")
	}
	o.AloneAnswered(t0, inlineReply, true)
	o.AloneAnswered(t0, inlineReply, true)
	if !o.Idle(t0.Add(StreamedFor)) || o.Idle(t0) {
		t.Fatal("idle: want after StreamedFor with nothing out, not before")
	}
}

// An object whose probe is not answered within the wait goes alone at
// once from then on, until an answer brings its bytes; a sender's
// answer has it go alone; a failed call decides nothing.
func TestRuleSendsAloneWhatItCannotBatch(t *testing.T) {
	var o Object
	o.Arrive(t0)
	o.Arrive(t0)
	o.TimerFired()
	if n, batch := o.Flush(t0); n != 1 || batch {
		t.Fatalf("after the probe's wait: %d, batch %v; want 1 alone", n, batch)
	}
	o.SentAlone()
	if alone, _, _ := o.Arrive(t0); !alone {
		t.Fatal("a slow object's Locate was queued")
	}
	if o.AloneAnswered(t0, nil, false) {
		t.Fatal("a failed call asked for a flush")
	}
	o.AloneAnswered(t0, inlineReply, true)
	o.AloneAnswered(t0, inlineReply, true)
	// The bytes came: no longer slow, batches again.
	o.Arrive(t0)
	if _, wait, _ := o.Arrive(t0); wait != WaitWindow {
		t.Fatalf("after the bytes came: wait %v, want the window", wait)
	}
	o.Leave()
	if o.AloneAnswered(t0, senderReply, true) {
		t.Fatal("a flush asked with nothing queued")
	}
	if alone, _, _ := o.Arrive(t0); !alone {
		t.Fatal("after a sender's answer a Locate was queued")
	}
}

// A queue of messages.MaxLocateBatch goes at once.
func TestRuleFlushesAFullQueue(t *testing.T) {
	var o Object
	o.Arrive(t0)
	for i := 1; i < messages.MaxLocateBatch; i++ {
		if _, _, flush := o.Arrive(t0); flush {
			t.Fatalf("flush at %d queued", i)
		}
	}
	if _, _, flush := o.Arrive(t0); !flush {
		t.Fatalf("no flush at %d queued", messages.MaxLocateBatch)
	}
}
