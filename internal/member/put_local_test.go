package member

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/localput"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// A Client's Put of localput.MinSize bytes or more to the store node in
// its own process carries the data's fingerprint, computed on the
// caller's goroutine (the node's mailbox does not wait for it); a small
// (inline) one takes the fast Put, with no message to the node. The
// fingerprint is the one the node would compute: the same bytes Put as a
// bare message on another member are the same object, other bytes a
// CONFLICT.
func TestLocalLargePutCarriesItsFingerprint(t *testing.T) {
	var (
		mu   sync.Mutex
		seen = map[string][]any{} // object id -> messages that put it
	)
	cfg := Config{Nodes: 2}
	cfg.hooks.Store.BeforeReceive = func(_ string, msg any) {
		mu.Lock()
		defer mu.Unlock()
		switch m := msg.(type) {
		case *messages.Put:
			seen[m.GetObjectId()] = append(seen[m.GetObjectId()], m)
		case *localput.Request:
			seen[m.Put.GetObjectId()] = append(seen[m.Put.GetObjectId()], m)
		}
	}
	l, err := StartLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	big, small := testutil.Pattern(7, localput.MinSize+5), testutil.Pattern(8, 1000)
	if err := l.Client(0).Put(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(0).Put(ctx, "small", small); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	bigMsgs, smallMsgs := seen["big"], seen["small"]
	mu.Unlock()
	if len(bigMsgs) != 1 {
		t.Fatalf("the large Put arrived as %d messages: %#v", len(bigMsgs), bigMsgs)
	}
	if r, ok := bigMsgs[0].(*localput.Request); !ok || r.Fingerprint != fingerprint.Of(big) {
		t.Fatalf("the large Put arrived as %T, want *localput.Request with fingerprint %x", bigMsgs[0], fingerprint.Of(big))
	}
	// The small Put is inline: its fast path registers it from the
	// caller's goroutine, and the node gets no Put at all.
	if len(smallMsgs) != 0 {
		t.Fatalf("the small (inline) Put arrived as %d messages, want none (the fast path)", len(smallMsgs))
	}
	if got, err := l.Client(1).Get(ctx, "small"); err != nil || string(got) != string(small) {
		t.Fatalf("Get of the small object on member 1: %v, %q", err, got)
	}
	bare := func(data []byte) error {
		m := l.Member(1)
		res, err := actorutil.Request(ctx, m.System().Root, m.StoreNode(), &messages.Put{ObjectId: "big", Data: data})
		if err != nil {
			return err
		}
		return messages.ErrOrNil(res.(*messages.PutReply).GetError())
	}
	if err := bare(big); err != nil {
		t.Fatalf("the same bytes Put as a bare message on member 1: %v, want the same object", err)
	}
	other := append([]byte(nil), big...)
	other[len(other)/2] ^= 1
	if err := bare(other); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("other bytes Put under the id: %v, want CONFLICT", err)
	}
	got, err := l.Client(1).Get(ctx, "big")
	if err != nil || string(got) != string(big) {
		t.Fatalf("Get on member 1: %v, %d bytes (equal %v)", err, len(got), string(got) == string(big))
	}
}
