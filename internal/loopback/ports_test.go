package loopback

import (
	"fmt"
	"net"
	"testing"
)

func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 5 {
		ps, err := Ports(8)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 8 {
			t.Fatalf("got %d ports, want 8", len(ps))
		}
		for _, p := range ps {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			if p >= ephemeralLow() {
				t.Fatalf("port %d is in the ephemeral range (from %d)", p, ephemeralLow())
			}
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("port %d is not free: %v", p, err)
			}
			ln.Close()
		}
	}
}
