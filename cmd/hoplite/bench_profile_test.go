package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// --profile is for testbed runs only: a usage error without --testbed,
// with --tls, for the failure scenario and with a window out of range;
// with --testbed it reaches the options as an absolute directory.
func TestBenchProfileFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "broadcast", "--profile", "/tmp/p"}, "--profile needs --testbed"},
		{[]string{"bench", "p2p", "--profile", "/tmp/p"}, "--profile needs --testbed"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) ||
			!strings.Contains(errb.String(), "hoplite "+commandName(c.args)+" -h") || out.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out.String(), errb.String(), c.want)
		}
	}
	base := func() benchFlags {
		var f benchFlags
		f.reps, f.nodes, f.size, f.bandwidth, f.chunk = 1, 3, "1MiB", "400mbit", "auto"
		f.testbed, f.profile, f.profileSeconds = true, "prof", 10
		return f
	}
	for _, c := range []struct {
		scenario string
		edit     func(f *benchFlags)
		want     string
	}{
		{"failure", func(*benchFlags) {}, "failure"},
		{"broadcast", func(f *benchFlags) { f.tls = true }, "--tls"},
		{"broadcast", func(f *benchFlags) { f.profileSeconds = 0 }, "--profile-seconds 0"},
		{"broadcast", func(f *benchFlags) { f.profileSeconds = 101 }, "--profile-seconds 101"},
	} {
		f := base()
		c.edit(&f)
		_, err := f.options(c.scenario)
		if _, ok := err.(usageError); !ok || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want a usage error with %q", c.scenario, f, err, c.want)
		}
	}
	f := base()
	o, err := f.options("broadcast")
	if err != nil || !filepath.IsAbs(o.Profile) || filepath.Base(o.Profile) != "prof" || o.ProfileSeconds != 10 {
		t.Errorf("--testbed --profile prof: %+v %v", o, err)
	}
	if legacyP2P([]string{"--profile", "x"}) || legacyP2P([]string{"--profile-seconds=5"}) {
		t.Error("bench p2p --profile is taken for the loopback benchmark")
	}
	code, _, stderr := hoplite(t, "bench", "broadcast", "-h")
	if code != 0 || !strings.Contains(stderr, "-profile string") || !strings.Contains(stderr, "-profile-seconds int") {
		t.Errorf("bench -h does not show --profile:\n%s", stderr)
	}
}
