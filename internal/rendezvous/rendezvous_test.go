package rendezvous

import (
	"fmt"
	"testing"
)

// owner is the member of highest weight for key.
func owner(members []string, key uint64) string {
	best, bestW := "", uint64(0)
	for _, m := range members {
		if w := Weight(Seed(m), key); best == "" || w > bestW {
			best, bestW = m, w
		}
	}
	return best
}

// A member leaving moves only the keys it owned; the others keep theirs,
// and the moved keys spread over the remaining members.
func TestLeavingMovesOnlyItsKeys(t *testing.T) {
	var members []string
	for i := range 8 {
		members = append(members, fmt.Sprintf("node-%d", i))
	}
	gone := "node-3"
	var rest []string
	for _, m := range members {
		if m != gone {
			rest = append(rest, m)
		}
	}
	moved, newOwners := 0, map[string]bool{}
	for k := range uint64(4096) {
		before, after := owner(members, k), owner(rest, k)
		if before != gone && after != before {
			t.Fatalf("key %d moved from %s to %s although %s stayed", k, before, after, before)
		}
		if before == gone {
			moved++
			newOwners[after] = true
		}
	}
	if moved < 4096/16 || moved > 4096/4 {
		t.Fatalf("%s owned %d of 4096 keys, want about 1/8", gone, moved)
	}
	if len(newOwners) < len(rest)/2 {
		t.Fatalf("its keys went to only %v", newOwners)
	}
}

func TestKeyAndSeedAgree(t *testing.T) {
	if Key("a") != Seed("a") || Key("a") == Key("b") {
		t.Fatal("Key and Seed hash strings alike, and differ between strings")
	}
}
