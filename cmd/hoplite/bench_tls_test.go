package main

import (
	"bytes"
	"strings"
	"testing"
)

// --tls is for testbed runs only (the in-process cluster has no TLS): a
// usage error without --testbed, and for the failure scenario; with
// --testbed it asks for ours-tls. `bench p2p --tls` alone stays the
// loopback benchmark's flag.
func TestBenchTLSFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "broadcast", "--tls"}, "--tls needs --testbed"},
		{[]string{"bench", "p2p", "--nodes", "2", "--tls"}, "--tls needs --testbed"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) ||
			!strings.Contains(errb.String(), "hoplite "+commandName(c.args)+" -h") || out.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out.String(), errb.String(), c.want)
		}
	}
	var f benchFlags
	f.reps, f.nodes, f.size, f.bandwidth, f.chunk = 1, 3, "1MiB", "400mbit", "auto"
	f.tls, f.testbed = true, true
	if _, err := f.options("failure"); err == nil || !strings.Contains(err.Error(), "failure") {
		t.Errorf("--tls for failure: %v", err)
	}
	o, err := f.options("broadcast")
	if err != nil || !o.TLS {
		t.Errorf("--testbed --tls: %+v %v", o, err)
	}
	if legacyP2P([]string{"--size", "1GiB", "--tls"}) != true || legacyP2P([]string{"--testbed", "--tls"}) != false {
		t.Error("bench p2p --tls is not the loopback benchmark's, or --testbed --tls not the scenario's")
	}
}
