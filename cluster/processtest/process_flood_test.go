package processtest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
)

// openFDs counts a process's open file descriptors.
func openFDs(t *testing.T, p *nodeProc) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestProcessSlowClientFlood: 300 clients of one address (127.0.0.2, not
// the members' nor this test's client's) connect to each of a member's
// ports (manage, data, remote) and say nothing, or a few bytes; the member
// keeps serving meanwhile, refuses what is over the address's limits at
// once (the manage port), and drops the rest within its request deadline
// (10 s at most): its file descriptors and goroutines return to their
// baseline.
func TestProcessSlowClientFlood(t *testing.T) {
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	a := startNode(t, bin, slots[0], seeds)
	b := startNode(t, bin, slots[1], seeds)
	a.waitStarted(t, 60*time.Second)
	b.waitStarted(t, 60*time.Second)
	c := newTestClient(t)
	c.converge(t, a, b)
	data := randomBytes(8, 2<<20)
	putRetry(t, c.of(a), "before-flood", data)
	getExact(t, c.of(b), "before-flood", data)
	time.Sleep(500 * time.Millisecond)
	_, m := scrape(t, a, "/metrics")
	baseFDs, baseG := openFDs(t, a), sample(m, "go_goroutines", "")

	dataAddr := ""
	for _, line := range []string{a.stdout.String()} {
		if m := startLine.FindStringSubmatch(firstLine(line)); m != nil {
			dataAddr = m[3]
		}
	}
	if dataAddr == "" {
		t.Fatal("no data address in the start line")
	}
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	flood := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
	for _, addr := range []string{a.slot.manage, dataAddr, a.address} {
		for i := range 300 {
			nc, err := flood.Dial("tcp", addr)
			if errors.Is(err, syscall.ECONNRESET) {
				continue // refused at once: over the address's limit
			}
			if err != nil {
				t.Fatalf("flood %s: connection %d: %v", addr, i, err)
			}
			if i%2 == 1 {
				nc.Write([]byte("GE")) // a few bytes, then silence
			}
			conns = append(conns, nc)
		}
	}
	// Still serving: a Get crosses the data plane, a scrape answers.
	getExact(t, c.of(b), "before-flood", data)
	if code, _ := scrape(t, a, "/metrics"); code != http.StatusOK {
		t.Fatalf("/metrics during the flood: %d", code)
	}
	if held := openFDs(t, a); held < baseFDs+300 {
		t.Logf("only %d descriptors above the baseline during the flood (the manage port's limit queues the rest)", held-baseFDs)
	}
	end := time.Now().Add(40 * time.Second)
	for {
		fds := openFDs(t, a)
		_, m := scrape(t, a, "/metrics")
		g := sample(m, "go_goroutines", "")
		if fds <= baseFDs+10 && g <= baseG+20 {
			t.Logf("descriptors %d (baseline %d), goroutines %v (baseline %v)", fds, baseFDs, g, baseG)
			break
		}
		if time.Now().After(end) {
			t.Fatalf("after the flood: %d descriptors (baseline %d), %v goroutines (baseline %v): slow clients are held", fds, baseFDs, g, baseG)
		}
		time.Sleep(500 * time.Millisecond)
	}
	getExact(t, c.of(b), "before-flood", data)
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
