package member

import "testing"

// ProcessStore names a process's store node by its id's nonce, and
// nothing for an embedded member's id, whose incarnation ("node-1#1")
// names no actor.
func TestProcessStoreTakesOnlyAProcessNonce(t *testing.T) {
	pid := ProcessStore("127.0.0.1:7001#5f0c2a91", "127.0.0.1:7001")
	if pid.GetAddress() != "127.0.0.1:7001" || pid.GetId() != "node#5f0c2a91/store" {
		t.Fatalf("a process's store: %v", pid)
	}
	for _, id := range []string{"node-1", "node-1#1", "127.0.0.1:7001", "127.0.0.1:7001#", "127.0.0.1:7001#5f0c2a9"} {
		if pid := ProcessStore(id, "127.0.0.1:7001"); pid != nil {
			t.Errorf("ProcessStore(%q) = %v, want nil", id, pid)
		}
	}
}
