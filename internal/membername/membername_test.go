package membername

import (
	"fmt"
	"testing"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// forget empties the process's names: each test starts from none.
func forget() {
	known.Lock()
	defer known.Unlock()
	known.byRoot, known.order = map[string]string{}, nil
}

func TestActorByMemberID(t *testing.T) {
	forget()
	store := actor.NewPID("127.0.0.1:7001", "node#5f0c2a91/store")
	if got, want := Actor(store), "127.0.0.1:7001/node#5f0c2a91/store"; got != want {
		t.Fatalf("unregistered: %q, want %q", got, want)
	}
	Register("127.0.0.1:7001", "node#5f0c2a91", "127.0.0.1:7001#5f0c2a91")
	if got, want := Actor(store), "127.0.0.1:7001#5f0c2a91/store"; got != want {
		t.Fatalf("registered: %q, want %q", got, want)
	}
	// Another incarnation at the same address is another member.
	next := actor.NewPID("127.0.0.1:7001", "node#77aa0011/store")
	if got, want := Actor(next), "127.0.0.1:7001/node#77aa0011/store"; got != want {
		t.Fatalf("other incarnation: %q, want %q", got, want)
	}
	if got := Actor(actor.NewPID("127.0.0.1:7001", "node#5f0c2a91")); got != "127.0.0.1:7001#5f0c2a91" {
		t.Fatalf("the root itself: %q", got)
	}
	if got := Of("node-1", "node#ab12/shard-3"); got != "node-1/shard-3" {
		t.Fatalf("Of: %q", got)
	}
	if got := Of("", "node#ab12/shard-3"); got != "node#ab12/shard-3" {
		t.Fatalf("Of without a member: %q", got)
	}
}

func TestRegisterIsBounded(t *testing.T) {
	forget()
	for i := range maxKnown + 10 {
		Register("10.0.0.1:7001", fmt.Sprintf("node#%08x", i), fmt.Sprintf("m%d", i))
	}
	known.Lock()
	n, order := len(known.byRoot), len(known.order)
	known.Unlock()
	if n > maxKnown || order != n {
		t.Fatalf("%d names, %d in order; at most %d", n, order, maxKnown)
	}
	if Member("10.0.0.1:7001", "node#00000000") != "" {
		t.Fatal("the oldest name was kept past the bound")
	}
	if got := Member("10.0.0.1:7001", fmt.Sprintf("node#%08x", maxKnown+9)); got != fmt.Sprintf("m%d", maxKnown+9) {
		t.Fatalf("the newest name: %q", got)
	}
}
