package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// unit is a systemd unit file's [Service] settings; a setting given
// several times keeps every value.
func unit(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = l
		case section == "[Service]":
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("%s: %q", file, l)
			}
			out[k] = append(out[k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// envFile reads an EnvironmentFile's KEY=VALUE lines.
func envFile(t *testing.T, file string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		k, v, _ := strings.Cut(l, "=")
		out[k] = v
	}
	return out
}

var (
	braced   = regexp.MustCompile(`^(.*)\$\{([A-Za-z_][A-Za-z0-9_]*)\}(.*)$`)
	unbraced = regexp.MustCompile(`^\$([A-Za-z_][A-Za-z0-9_]*)$`)
)

// execStart splits an ExecStart= line as systemd does (this unit uses
// no quotes): ${VAR} is the variable's value in one word, a word that is
// only $VAR becomes its value's words, %d is the credentials directory.
func execStart(line string, env map[string]string, creds string) []string {
	var argv []string
	for _, w := range strings.Fields(line) {
		w = strings.ReplaceAll(w, "%d", creds)
		if m := unbraced.FindStringSubmatch(w); m != nil {
			argv = append(argv, strings.Fields(env[m[1]])...)
			continue
		}
		for m := braced.FindStringSubmatch(w); m != nil; m = braced.FindStringSubmatch(w) {
			w = m[1] + env[m[2]] + m[3]
		}
		argv = append(argv, w)
	}
	return argv
}

// TestSystemdUnitRuns runs the unit's ExecStart with its example
// environment file: the hosts it names are loopback addresses here, and
// the credentials it loads are a certificate `hoplite certs` signed. The
// member starts, answers /_health over mutual TLS and leaves within
// TimeoutStopSec of the KillSignal.
func TestSystemdUnitRuns(t *testing.T) {
	bins := binaries(t)
	u := unit(t, "systemd/hoplite.service")
	env := envFile(t, "systemd/hoplite.env")
	if got := u["EnvironmentFile"]; len(got) != 1 || filepath.Base(got[0]) != "hoplite.env" {
		t.Fatalf("EnvironmentFile %q, want the example's hoplite.env", got)
	}
	hostNames := map[string]bool{}
	for _, k := range []string{"HOPLITE_BIND", "HOPLITE_SEEDS", "HOPLITE_FLAGS"} {
		for _, m := range regexp.MustCompile(`([a-z0-9.-]+\.example):\d+`).FindAllStringSubmatch(env[k], -1) {
			hostNames[m[1]] = true
		}
	}
	ips := loopbackHosts(t, len(hostNames), 7000, 7100, 8000)
	var pairs []string
	i := 0
	for h := range hostNames {
		pairs = append(pairs, h, ips[i])
		i++
	}
	hosts := strings.NewReplacer(pairs...)
	for k, v := range env {
		env[k] = hosts.Replace(v)
	}
	self, _, _ := strings.Cut(env["HOPLITE_BIND"], ":")

	certs := t.TempDir()
	if out, err := run(t, []string{bins[imageHoplite], "certs", "--dir", certs, "--hosts", self}, nil); err != nil {
		t.Fatalf("hoplite certs: %v\n%s", err, out)
	}
	// LoadCredential=ID:PATH puts PATH's file at %d/ID.
	creds := t.TempDir()
	for _, lc := range u["LoadCredential"] {
		id, src, _ := strings.Cut(lc, ":")
		b, err := os.ReadFile(filepath.Join(certs, filepath.Base(src)))
		if err != nil {
			t.Fatalf("LoadCredential=%s: %v", lc, err)
		}
		if err := os.WriteFile(filepath.Join(creds, id), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if len(u["ExecStart"]) != 1 {
		t.Fatalf("ExecStart %q, want one", u["ExecStart"])
	}
	argv := execStart(u["ExecStart"][0], env, creds)
	bin, ok := bins["/usr/local/bin/"+filepath.Base(argv[0])]
	if !ok {
		t.Fatalf("ExecStart runs %s", argv[0])
	}
	argv[0] = bin
	n := startNode(t, argv, nil)

	probe := []string{bins[imageProbe], "--url", "https://" + self + ":8000/_health",
		"--cert", filepath.Join(creds, "member.pem"), "--key", filepath.Join(creds, "member-key.pem"), "--ca", filepath.Join(creds, "ca.pem")}
	if out, err := run(t, probe, nil); err != nil {
		t.Fatalf("/_health: %v\n%s", err, out)
	}
	if sig := u["KillSignal"]; len(sig) != 1 || sig[0] != "SIGTERM" {
		t.Errorf("KillSignal %q: want SIGTERM, on which a member leaves gracefully", sig)
	}
	stop, err := time.ParseDuration(strings.Join(u["TimeoutStopSec"], "") + "s")
	if err != nil || stop < leaveBound*time.Second {
		t.Fatalf("TimeoutStopSec %q: want seconds, at least the leave's %d", u["TimeoutStopSec"], leaveBound)
	}
	if err := n.stop(t, stop); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}
