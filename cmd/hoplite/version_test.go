package main

import (
	"context"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

// TestVersionOf: what `hoplite version` says for each kind of build.
func TestVersionOf(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev},
			{Key: "vcs.time", Value: "2026-11-25T07:00:00Z"}, {Key: "vcs.modified", Value: modified}}
	}
	const rev = "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"a release, as a dependency", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}}, true,
			"v1.2.0 go1.26.8"},
		{"a clone, committed", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "false")}, true,
			"(devel) " + rev + " go1.26.8"},
		{"a clone, with changes", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs(rev, "true")}, true,
			"(devel) " + rev + " (modified) go1.26.8"},
		{"-buildvcs=false", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "-buildvcs", Value: "false"}}}, true,
			"(devel) (no VCS revision: built outside a clone or with -buildvcs=false) go1.26.8"},
		{"no module version", &debug.BuildInfo{GoVersion: "go1.26.8"}, true,
			"(devel) (no VCS revision: built outside a clone or with -buildvcs=false) go1.26.8"},
		{"no build information", nil, false, "unknown (the binary carries no build information)"},
		{"a dependent's build, Hoplite replaced by a checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/hoplite-go/hoplite",
			Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "/src/hoplite", Version: "(devel)"}}}, true,
			"v0.0.0-00010101000000-000000000000 => /src/hoplite go1.26.8"},
	} {
		if got := versionOf(c.bi, c.ok); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestVersionCommand: `hoplite version` prints one line, exit 0.
func TestVersionCommand(t *testing.T) {
	code, out, errs := hoplite(t, "version")
	if code != 0 || errs != "" || !strings.HasPrefix(out, "hoplite ") || strings.Count(out, "\n") != 1 ||
		!strings.HasSuffix(out, " "+runtime.Version()+"\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestVersionOfABuiltBinary: a binary built here says the revision and
// modified flag the go command stamped into it (what `go version -m`
// reads), or that it has none.
func TestVersionOfABuiltBinary(t *testing.T) {
	bin := builtHoplite(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	meta, err := exec.CommandContext(ctx, "go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, meta)
	}
	settings := map[string]string{}
	module := ""
	for _, line := range strings.Split(string(meta), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "build":
			k, v, _ := strings.Cut(f[1], "=")
			settings[k] = v
		case len(f) >= 3 && f[0] == "mod":
			module = f[2] // (devel), or a pseudo-version stamped from the clone
		}
	}
	code, out, errs := cli(t, bin, nil, "version")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "hoplite " + module + " (no VCS revision"
	if rev := settings["vcs.revision"]; rev != "" {
		want = "hoplite " + module + " " + rev
		if settings["vcs.modified"] == "true" {
			want += " (modified)"
		}
		want += " go"
	}
	if !strings.HasPrefix(out, want) {
		t.Fatalf("version %q, want it to start %q (module %s, build settings %v)", out, want, module, settings)
	}
}
