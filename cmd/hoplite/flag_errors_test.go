package main

import (
	"strings"
	"testing"
)

// TestFlagErrorsCarryThePrefix: the flag package's own errors (an unknown
// flag, a value it cannot parse) carry the command's prefix as typed, as
// every other error does, before the usage; they exit 2.
func TestFlagErrorsCarryThePrefix(t *testing.T) {
	for _, c := range []struct {
		args []string
		cmd  string
		want string
	}{
		{[]string{"demo", "--nosuch"}, "demo", "flag provided but not defined: -nosuch"},
		{[]string{"bench", "--nosuch"}, "bench", "flag provided but not defined: -nosuch"},
		{[]string{"bench", "broadcast", "--reps", "x"}, "bench broadcast", `invalid value "x" for flag -reps`},
		{[]string{"bench", "p2p", "--nosuch"}, "bench p2p", "flag provided but not defined: -nosuch"},
		{[]string{"bench", "p2p-tcp", "--nosuch"}, "bench p2p-tcp", "flag provided but not defined: -nosuch"},
		{[]string{"bench", "report", "--results"}, "bench report", "flag needs an argument: -results"},
		{[]string{"bench", "scale-plot", "--nosuch"}, "bench scale-plot", "flag provided but not defined: -nosuch"},
		{[]string{"node", "--nosuch"}, "node", "flag provided but not defined: -nosuch"},
		{[]string{"certs", "--nosuch"}, "certs", "flag provided but not defined: -nosuch"},
		{[]string{"sim", "--nosuch"}, "sim", "flag provided but not defined: -nosuch"},
		{[]string{"get", "--timeout", "soon", "id"}, "get", `invalid value "soon" for flag -timeout`},
		{[]string{"ls", "--all=maybe"}, "ls", `invalid boolean value "maybe" for -all`},
	} {
		code, stdout, stderr := hoplite(t, c.args...)
		first, rest, _ := strings.Cut(stderr, "\n")
		if code != 2 || !strings.HasPrefix(first, "hoplite "+c.cmd+": "+c.want) || !strings.HasPrefix(rest, "usage: hoplite ") || stdout != "" {
			t.Errorf("%v: exit %d, stderr %q; want 2, %q and the usage", c.args, code, stderr, "hoplite "+c.cmd+": "+c.want)
		}
	}
}
