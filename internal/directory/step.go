package directory

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// Events a LocationTable steps on beside the wire messages it takes as
// they come (*messages.PublishLocation, UnpublishLocation, FetchDone,
// FetchAborted, CancelLocate, ReleaseTarget and Tombstones). ReplyTo is
// the opaque reply target the table's answer is sent to (a Send's To).
type (
	// Create registers an object for its creator (a Put).
	Create struct {
		Req     *messages.CreateObject
		ReplyTo any
	}
	// ReportLost removes a node's copy on its owner's word.
	ReportLost struct {
		Req     *messages.ReportLost
		ReplyTo any
	}
	// NodeFailed forgets every copy on a failed node and every request
	// it had parked.
	NodeFailed struct{ Node string }
	// IncarnationFailed is NodeFailed for the incarnation of Node at
	// Address.
	IncarnationFailed struct{ Node, Address string }
	// Republished is the shell's word that every store node alive when
	// the table started has republished what it holds.
	Republished struct{}
	// AwaitRepublish is the shell's word that it asked store nodes that
	// came into its view after Republished to republish: until the next
	// Republished, a Delete of an id the table does not know waits, as
	// before the first (one of them may hold a copy: a member that
	// rejoined placed its shards before it saw every member).
	AwaitRepublish struct{}
	// Subscribe pushes every current and future location of the object
	// to To, the subscriber whose key is Key.
	Subscribe struct {
		Req *messages.Subscribe
		Key string
		To  any
	}
	// Unsubscribe stops the pushes to the subscriber with key Key.
	Unsubscribe struct {
		Req *messages.Unsubscribe
		Key string
	}
	// Delete removes the entry and every copy.
	Delete struct {
		Req     *messages.DeleteObject
		ReplyTo any
	}
	// DeleteNaming is Delete in a table not yet told Republished: the
	// answer names Pending, the store nodes not heard from yet.
	DeleteNaming struct {
		Req     *messages.DeleteObject
		ReplyTo any
		Pending []*messages.NodeRef
	}
	// Locate finds one sender for a receiver, or parks the request.
	Locate struct {
		Req     *messages.Locate
		ReplyTo any
	}
	// AbandonLocate withdraws the one parked Locate of object ID whose
	// answer was to go to ReplyTo.
	AbandonLocate struct {
		ID      string
		ReplyTo any
	}
	// Query answers what the directory knows of an object, or parks
	// the request until it knows more.
	Query struct {
		Req     *messages.QueryObject
		ReplyTo any
	}
	// FailWaiters answers every parked request with Err (the shard is
	// about to lose its soft state).
	FailWaiters struct{ Err *messages.Error }
	// Tick is the table's one timer, armed for At: parked requests past
	// their deadline are answered TIMEOUT, doubts past their grace
	// settled.
	Tick struct{ At time.Time }
)

// Step applies one event at now: one of the events above, or one of
// the wire messages the table takes as they come. Its Box holds the
// answers, and a Tick timer whenever the table's next deadline is
// earlier than the one it armed (at most one is pending that matters:
// a later Tick finds nothing to do, an earlier one would have been
// asked for). Any other event asks for nothing.
func (t *LocationTable) Step(now time.Time, ev any) outbox.Box {
	taken := t.takeInlineReaders()
	out := t.step(now, ev)
	if len(taken) > 0 {
		out.Sends = append(taken, out.Sends...)
	}
	return out
}

func (t *LocationTable) step(now time.Time, ev any) outbox.Box {
	var out outbox.Box
	switch e := ev.(type) {
	case Create:
		out = t.onCreate(e.Req, e.ReplyTo)
	case *messages.PublishLocation:
		out = t.onPublish(e)
	case *messages.UnpublishLocation:
		out = t.onUnpublish(e)
	case *messages.FetchDone:
		out = t.onFetchDone(e)
	case *messages.FetchAborted:
		out = t.onFetchAborted(e)
	case ReportLost:
		out = t.onReportLost(e.Req, e.ReplyTo)
	case NodeFailed:
		out = t.onNodeFailed(e.Node)
	case IncarnationFailed:
		out = t.onIncarnationFailed(e.Node, e.Address)
	case Republished:
		out = t.onRepublished()
	case AwaitRepublish:
		if t.amnesic || t.cfg.AwaitRepublish {
			t.republished = false
		}
	case *messages.ReleaseTarget:
		out = t.onRelease(e)
	case Subscribe:
		out = t.onSubscribe(e.Req, e.Key, e.To)
	case Unsubscribe:
		out = t.onUnsubscribe(e.Req, e.Key)
	case Delete:
		out = t.onDelete(e.Req, e.ReplyTo)
	case DeleteNaming:
		out = t.onDeleteNaming(e.Req, e.ReplyTo, e.Pending)
	case *messages.Tombstones:
		out = t.onApplyTombstones(e)
	case Locate:
		out = t.onLocate(e.Req, e.ReplyTo, now)
	case AbandonLocate:
		out = t.onAbandonLocate(e.ID, e.ReplyTo)
	case *messages.CancelLocate:
		out = t.onCancelLocate(e)
	case Query:
		out = t.onQuery(e.Req, e.ReplyTo, now)
	case FailWaiters:
		out = t.onFailWaiters(e.Err)
	case Tick:
		if e.At.Equal(t.armed) {
			t.armed = time.Time{}
		}
		out = t.onTick(now)
	default:
		return out
	}
	if d := t.nextDeadline; !d.IsZero() && (t.armed.IsZero() || d.Before(t.armed)) {
		t.armed = d
		out.After(d, Tick{At: d})
	}
	return out
}
