//go:build linux

package processtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
)

// scaleBed is the namespace testbed (bench/testbed) the scale benchmark
// runs its members on with HOPLITE_SCALE_TESTBED: one member per network
// namespace, each behind its own shaped link, and the benchmark's client
// on the testbed's bridge (a member answers its client at the client's
// address, which inside a namespace cannot be 127.0.0.1).
type scaleBed struct {
	prefix string
	net    int
	client *testClient
	gen    int // runs so far: each takes ports of its own
}

// startScaleBed brings up a testbed of hosts hosts with links of
// bandwidth (tc units, e.g. 50mbit) for the whole benchmark, and a client
// on its bridge.
func startScaleBed(t testing.TB, hosts int, bandwidth string) *scaleBed {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("HOPLITE_SCALE_TESTBED needs root: the testbed creates network namespaces")
	}
	script, err := filepath.Abs("../../bench/testbed")
	if err != nil {
		t.Fatal(err)
	}
	// A network and prefix no other testbed on the machine uses (the
	// benchmarks' default is hpb on 198.18.3.0/24).
	addrs, err := exec.Command("ip", "-o", "addr", "show").Output()
	if err != nil {
		t.Fatalf("ip -o addr show: %v", err)
	}
	b := &scaleBed{net: -1}
	for k := 60; k < 100; k++ {
		if !strings.Contains(string(addrs), fmt.Sprintf("198.18.%d.", k)) {
			b.prefix, b.net = "hps"+strconv.Itoa(k), k
			break
		}
	}
	if b.net < 0 {
		t.Fatal("no free testbed network in 198.18.60-99.0/24")
	}
	up := exec.Command(script, "up", "--hosts", strconv.Itoa(hosts), "--bandwidth", bandwidth, "--prefix", b.prefix, "--net", strconv.Itoa(b.net))
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("testbed up: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command(script, "down", "--prefix", b.prefix).CombinedOutput(); err != nil {
			t.Errorf("testbed down: %v\n%s", err, out)
		}
	})
	port := freePorts(t, 1)[0]
	system := actor.NewActorSystem(actor.WithLoggerFactory(quietSlog))
	r := remote.NewRemote(system, cluster.RemoteConfig(b.host(-1), port, nil, nil))
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	b.client = &testClient{system: system}
	return b
}

// host is host i's address; -1 is the bridge's.
func (b *scaleBed) host(i int) string {
	if i < 0 {
		return fmt.Sprintf("198.18.%d.254", b.net)
	}
	return fmt.Sprintf("198.18.%d.%d", b.net, i+1)
}

// slots are the first n hosts' member endpoints for the next run, and
// the seeds (every manage endpoint).
func (b *scaleBed) slots(n int) ([]memberSlot, []string) {
	b.gen++
	bind, manage := 20000+2*(b.gen%400), 30000+2*(b.gen%400)
	var slots []memberSlot
	var seeds []string
	for i := range n {
		s := memberSlot{bind: fmt.Sprintf("%s:%d", b.host(i), bind), manage: fmt.Sprintf("%s:%d", b.host(i), manage)}
		slots = append(slots, s)
		seeds = append(seeds, s.manage)
	}
	return slots, seeds
}

// wrap starts a process in host i's namespace. GOMAXPROCS is the
// member's share of the machine's CPUs, as the testbed benchmarks run
// their members.
func (b *scaleBed) wrap(i, members int) []string {
	return []string{"ip", "netns", "exec", fmt.Sprintf("%s-h%d", b.prefix, i), "env",
		"GOMAXPROCS=" + strconv.Itoa(max(1, runtime.NumCPU()/members))}
}

// sent is the bytes hosts 0..n-1 have sent on their links: what the
// bridge's end of each host's veth received. Unlike the bytes through a
// process's system calls it counts datagrams (sendto is no write) and
// nothing of the logs.
func (b *scaleBed) sent(t testing.TB, n int) int64 {
	t.Helper()
	var total int64
	for i := range n {
		raw, err := os.ReadFile(fmt.Sprintf("/sys/class/net/%s-v%d/statistics/rx_bytes", b.prefix, i))
		if err != nil {
			t.Fatalf("host %d's link: %v", i, err)
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
		if err != nil {
			t.Fatalf("host %d's link: %v", i, err)
		}
		total += v
	}
	return total
}
