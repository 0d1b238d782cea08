package member

import (
	"bytes"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// TestInlineBroadcastPastTheShardsBudgetRelays: an object under the
// inline limit Got by more receivers at once than its shard's uplink
// budget holds (directory.InlineQueueCopies copies on 1 MB/s emulated
// links) is answered with its bytes to the first, then relayed from the
// copies they hold: some receivers read it from another node, each copy
// is exact and recorded whole, and a Delete frees every copy, those the
// shard's answers made and those relayed.
func TestInlineBroadcastPastTheShardsBudgetRelays(t *testing.T) {
	const receivers = 2 * directory.InlineQueueCopies
	l := start(t, Config{Nodes: receivers + 1, LinkBandwidth: 1e6})
	ctx := deadline(t, 60*time.Second)
	data := randomBytes(11, 32<<10+5)
	if err := l.Client(0).Put(ctx, "small", data); err != nil {
		t.Fatal(err)
	}
	getOnEvery(t, ctx, l, "small", data, receivers)
	info := settledInfo(t, ctx, l.Client(0), "small")
	if !info.GetHasInline() {
		t.Fatalf("%d bytes not inline: %v", len(data), info)
	}
	relayed := senderOf(info)
	if len(relayed) == 0 {
		t.Fatalf("no receiver read from another copy: the shard answered all %d with the bytes", receivers)
	}
	for _, tr := range info.GetTransfers() {
		if tr.GetAborted() {
			t.Errorf("transfer %v aborted", tr)
		}
	}
	whole := 0
	for _, loc := range info.GetLocations() {
		if loc.GetState() == messages.LocationState_COMPLETE {
			whole++
		}
	}
	if whole != receivers+1 {
		t.Fatalf("%d whole copies recorded, want the creator's and %d receivers': %v", whole, receivers, info.GetLocations())
	}
	for i := 1; i <= receivers; i++ {
		o := l.Store(i).Lookup("small")
		if o == nil {
			t.Fatalf("node-%d holds no copy", i)
		}
		if b, ok := o.WholeBytes(); !ok || !bytes.Equal(b, data) {
			t.Fatalf("node-%d's copy is not the object (whole %v)", i, ok)
		}
	}
	t.Logf("%d of %d receivers relayed: %v", len(relayed), receivers, relayed)
	if err := l.Client(0).Delete(ctx, "small"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "every copy freed", func() bool {
		for i := 0; i <= receivers; i++ {
			if l.Store(i).Lookup("small") != nil {
				return false
			}
		}
		return true
	})
}
