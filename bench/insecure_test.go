package bench

import (
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/internal/certs"
)

// TestTestbedNodeArgsInsecure: the testbed's hosts bind 198.18.x.x, which
// `hoplite node` refuses in plaintext: every system but ours-tls passes
// -insecure, and ours-tls, which has certificates, does not.
func TestTestbedNodeArgsInsecure(t *testing.T) {
	o, err := (&Options{Scenario: "broadcast", Nodes: 2, Peers: []string{"naive"}, TLS: true, Testbed: &Testbed{}}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	files := certs.Files{CA: "/logs/tls/ca.pem", Cert: "/logs/tls/member.pem", Key: "/logs/tls/member-key.pem"}
	tb := &testbedRun{o: o, tb: &Testbed{Namespaces: []string{"x-h0", "x-h1"}, Binary: "/bin/hoplite"}, certs: files}
	seen := 0
	for _, s := range o.systems() {
		args := tb.nodeArgs(1, s, "198.18.77.2:20000", 30000, []string{"198.18.77.1:30000"})
		insecure, tls := slices.Contains(args, "-insecure"), slices.Contains(args, "-tls-cert")
		if insecure == tls {
			t.Errorf("%s: -insecure %v with -tls-cert %v: %q", s.name, insecure, tls, args)
		}
		seen++
	}
	if seen != 3 {
		t.Errorf("%d systems, want ours, ours-tls and naive", seen)
	}
}
