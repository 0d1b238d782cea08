//go:build linux

package processtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/nemesis"
)

// nemesisPrefix starts the names of every namespace, veth and bridge the
// nemesis tests make: a run removes what a crashed earlier one left.
const nemesisPrefix = "hpn"

// nemesisMissing says what the nemesis needs and this machine lacks, and
// how to get it, or "".
func nemesisMissing() string {
	if os.Geteuid() != 0 {
		return "not root: the network nemesis creates network namespaces and tc filters; run the suite as root (scripts/test, the README's test command, as root)"
	}
	for _, tool := range []string{"ip", "tc"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("no %s command: install iproute2 (as root: bench/peers/install, or apt-get install iproute2)", tool)
		}
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		return fmt.Sprintf("`ip netns list` fails (%v: %s): the kernel needs network namespaces", err, bytes.TrimSpace(out))
	}
	return ""
}

// run runs a command line within ctx and says its output if it fails.
func runCmd(ctx context.Context, c nemesis.Cmd) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, c[0], c[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(c, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

var nemesisNames = regexp.MustCompile(`^` + nemesisPrefix + `[0-9]+-(h[0-9]+|v[0-9]+|br)$`)

// nemesisOwner is the file that names the process that owns the bed of
// prefix.
func nemesisOwner(prefix string) string {
	return filepath.Join(os.TempDir(), "hoplite-nemesis-"+prefix+".pid")
}

// ownerGone reports whether the process that made the bed of prefix has
// ended (or never said who it was).
func ownerGone(prefix string) bool {
	b, err := os.ReadFile(nemesisOwner(prefix))
	if err != nil {
		return true
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return true
	}
	_, err = os.Stat(fmt.Sprintf("/proc/%d", pid))
	return os.IsNotExist(err)
}

// nemesisNamesInUse lists every namespace and link of the system.
func nemesisNamesInUse(ctx context.Context) []string {
	var names []string
	out, _ := exec.CommandContext(ctx, "ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	out, _ = exec.CommandContext(ctx, "ip", "-o", "link", "show").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			names = append(names, name)
		}
	}
	return names
}

// sweepNemesisBeds removes the namespaces, veths and bridges of the
// nemesis's beds whose owner has ended (a crashed run's, which hold
// addresses of 198.18.0.0/15), and those of the prefix mine.
func sweepNemesisBeds(ctx context.Context, mine string) {
	gone := map[string]bool{}
	for _, name := range nemesisNamesInUse(ctx) {
		if !nemesisNames.MatchString(name) {
			continue
		}
		prefix, kind, _ := strings.Cut(name, "-")
		if _, ok := gone[prefix]; !ok {
			gone[prefix] = prefix == mine || ownerGone(prefix)
		}
		if !gone[prefix] {
			continue
		}
		// A namespace's members die with their test process
		// (Pdeathsig); deleting it waits for none of them. Its veth end
		// goes with it, the root's end and the bridge by name.
		if strings.HasPrefix(kind, "h") {
			_ = runCmd(ctx, nemesis.Cmd{"ip", "netns", "delete", name})
		} else {
			_ = runCmd(ctx, nemesis.Cmd{"ip", "link", "delete", name})
		}
	}
	for prefix, g := range gone {
		if g {
			os.Remove(nemesisOwner(prefix))
		}
	}
}

// nemesisBed builds a bed of n hosts for this test, with a prefix and a
// net no other bed uses, and removes it when the test ends, failed or
// not.
func nemesisBed(t *testing.T, n int) nemesis.Bed {
	t.Helper()
	ctx := t.Context()
	sweepNemesisBeds(ctx, "")
	inUse := strings.Join(nemesisNamesInUse(ctx), "\n") + "\n"
	addrs, err := exec.CommandContext(ctx, "ip", "-o", "addr", "show").Output()
	if err != nil {
		t.Fatalf("ip -o addr show: %v", err)
	}
	b := nemesis.Bed{Hosts: n, Net: -1}
	for i := range 1000 {
		if p := fmt.Sprintf("%s%d", nemesisPrefix, (os.Getpid()+i)%1000); !strings.Contains(inUse, "\n"+p+"-") && !strings.HasPrefix(inUse, p+"-") {
			b.Prefix = p
			break
		}
	}
	for i := range 50 {
		if k := 200 + (os.Getpid()+i)%50; !strings.Contains(string(addrs), fmt.Sprintf("198.18.%d.", k)) {
			b.Net = k
			break
		}
	}
	if b.Prefix == "" || b.Net < 0 {
		t.Fatal("no free prefix, or no free network in 198.18.200-249.0/24, for the nemesis's bed")
	}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nemesisOwner(b.Prefix), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sweepNemesisBeds(ctx, b.Prefix)
	})
	for _, c := range b.Up() {
		if err := runCmd(ctx, c); err != nil {
			t.Fatalf("build the nemesis's bed: %v", err)
		}
	}
	return b
}
