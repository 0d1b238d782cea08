package bench

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTestbedHostsReachEachOther: on a testbed of 34 hosts every host
// resolves every other's address. The kernel keeps all namespaces' ARP
// entries in one table capped by the root namespace's gc_thresh3 (1,024
// by default): 34 x 33 entries overflowed it, connections failed with "no
// route to host", and members of a 32-host testbed never saw each other.
// A connection to a port nothing listens on is refused only once the
// address resolved; the kernel counts every time the table was full
// (table_fulls), which must not grow while the hosts resolve each other.
func TestTestbedHostsReachEachOther(t *testing.T) {
	const hosts = 34
	script, prefix, net := upTestbed(t, hosts)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	fulls := arpTableFulls(t)
	var addrs []string
	for i := range hosts {
		addrs = append(addrs, fmt.Sprintf("198.18.%d.%d", net, i+1))
	}
	// Port 9 (discard): nothing listens on the hosts.
	probe := `for a in "$@"; do r=$( (exec 3<>"/dev/tcp/$a/9") 2>&1 ); case $r in *refused*) ;; *) echo "$a: $r" ;; esac; done`
	var failed []string
	for i := range hosts {
		args := append([]string{"exec", "--prefix", prefix, strconv.Itoa(i), "--", "timeout", "60", "bash", "-c", probe, "probe"}, addrs...)
		out, err := exec.CommandContext(ctx, script, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("host %d: %v\n%s", i, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if line != "" && !strings.HasPrefix(line, addrs[i]+":") {
				failed = append(failed, fmt.Sprintf("host %d to %s", i, line))
			}
		}
	}
	if n := arpTableFulls(t); n != fulls {
		t.Errorf("the kernel's ARP table was full %d times while the hosts resolved each other", n-fulls)
	}
	if len(failed) > 0 {
		t.Fatalf("%d of %d connections did not reach their host (want each refused), e.g. %s", len(failed), hosts*(hosts-1), strings.Join(failed[:min(5, len(failed))], "; "))
	}
}

// arpTableFulls is the kernel's count of the times its ARP table was full
// (one table for all namespaces).
func arpTableFulls(t *testing.T) int {
	t.Helper()
	out, err := exec.Command("ip", "-s", "ntable", "show", "name", "arp_cache").Output()
	if err != nil {
		t.Fatalf("ip -s ntable show name arp_cache: %v", err)
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "table_fulls" {
			n, err := strconv.Atoi(f[i+1])
			if err != nil {
				t.Fatalf("table_fulls %q: %v", f[i+1], err)
			}
			return n
		}
	}
	t.Fatalf("no table_fulls in:\n%s", out)
	return 0
}

// upTestbed brings up a testbed of hosts hosts on a network and prefix
// of its own, taken down when the test ends, and returns the script, the
// prefix and the network. It skips the test where the testbed cannot run
// (not root, no iproute2).
func upTestbed(t *testing.T, hosts int) (script, prefix string, net int) {
	t.Helper()
	script, _ = filepath.Abs("testbed")
	requireTestbed(t, script)
	prefix, net, err := freeTestbedNet()
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(script, "up", "--hosts", strconv.Itoa(hosts), "--prefix", prefix, "--net", strconv.Itoa(net))
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("testbed up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "down", "--prefix", prefix).CombinedOutput(); err != nil {
			t.Errorf("testbed down: %v\n%s", err, out)
		}
	})
	return script, prefix, net
}
