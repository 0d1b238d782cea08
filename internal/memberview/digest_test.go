package memberview

import "testing"

func TestDigest(t *testing.T) {
	a := Digest([]string{"node-1#a", "node-2#b"})
	if a == 0 {
		t.Fatal("a digest of 0 reads as no digest")
	}
	if a != Digest([]string{"node-1#a", "node-2#b"}) {
		t.Fatal("the same view digests differently")
	}
	for _, other := range [][]string{
		{"node-1#a"},
		{"node-1#a", "node-2#c"},
		{"node-1#anode-2#b"},
		{"node-1#", "anode-2#b"},
		{"node-1#a", "node-2#b", "node-3#c"},
		nil,
	} {
		if Digest(other) == a {
			t.Fatalf("%q digests as the view %q", other, []string{"node-1#a", "node-2#b"})
		}
	}
}
