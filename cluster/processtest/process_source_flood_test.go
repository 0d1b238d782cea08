package processtest

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// TestProcessFloodFromOneAddress: one address (127.0.0.2) opens 1,024
// connections to a member's data port, each parking a request (a Locate
// of an object nobody Puts), and 512 silent connections to its manage
// port, and holds them for longer than the membership takes to expel a
// member whose health checks fail. Meanwhile the members at 127.0.0.1
// keep answering each other within their deadlines: nobody is expelled,
// objects cross the flooded member's data port, and its health and
// metrics answer. Slots were taken at accept, before any request: the
// same flood made every other peer's requests fail for seconds and timed
// the health checks out.
func TestProcessFloodFromOneAddress(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	a := startNode(t, bin, slots[0], seeds)
	b := startNode(t, bin, slots[1], seeds)
	c3 := startNode(t, bin, slots[2], seeds)
	for _, p := range []*nodeProc{a, b, c3} {
		p.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	want := c.converge(t, a, b, c3)
	data := randomBytes(55, 1<<20)
	putRetry(t, c.of(a), "before-the-flood", data)

	dataAddr := ""
	if m := startLine.FindStringSubmatch(firstLine(a.stdout.String())); m != nil {
		dataAddr, _, _ = strings.Cut(m[3], "#")
	}
	if dataAddr == "" {
		t.Fatal("no data address in the start line")
	}
	from := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	var conns []net.Conn
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	silent := func(addr string, n int) {
		for range n {
			nc, err := from.Dial("tcp", addr)
			if err != nil {
				// Refused or reset at accept is what a limit does; the
				// flood goes on with the connections it got.
				continue
			}
			conns = append(conns, nc)
		}
	}
	// 1,024 data-plane connections, each parking a Locate (a control
	// request) of an id whose shard is on a and which nobody Puts, for a
	// minute: a peer parks requests like these while it waits for
	// objects.
	parked := 0
	for i := range 1024 {
		nc, err := from.Dial("tcp", dataAddr)
		if err != nil {
			continue
		}
		conns = append(conns, nc)
		id := idOwnedBy(t, want, a.id, fmt.Sprint("parked-", i))
		req, err := proto.Marshal(&messages.Locate{ObjectId: id, TimeoutMs: 60_000,
			Receiver: &messages.NodeRef{NodeId: "127.0.0.2:1#flood", Address: "127.0.0.2:1", ActorId: "store"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := nc.Write(controlRequest(messages.ControlLocate, req, time.Minute)); err == nil {
			parked++
		}
	}
	silent(a.slot.manage, 512)
	t.Logf("the flood holds %d connections, %d of them sent a Locate", len(conns), parked)

	// Longer than the health checks take to expel a member (-refresh
	// 100ms, a few misses) and than the old 10 s header timeout.
	end := time.Now().Add(15 * time.Second)
	hc := http.Client{Timeout: 5 * time.Second}
	for i := 0; time.Now().Before(end); i++ {
		for _, p := range []*nodeProc{a, b, c3} {
			v, err := c.view(p)
			if err != nil {
				t.Fatalf("during the flood, %s did not answer its view: %v", p.id, err)
			}
			if !slices.Equal(v, want) {
				t.Fatalf("during the flood, %s sees %v, not %v: a member was expelled", p.id, v, want)
			}
		}
		resp, err := hc.Get("http://" + a.slot.manage + "/_health")
		if err != nil {
			t.Fatalf("during the flood, the flooded member's health check: %v", err)
		}
		resp.Body.Close()
		// A copy crosses the flooded data port to a member that has none.
		if i%4 == 0 {
			id := fmt.Sprint("during-the-flood-", i)
			putRetry(t, c.of(a), id, data[:64<<10+i])
			getExact(t, c.of([]*nodeProc{b, c3}[i%2]), id, data[:64<<10+i])
		}
		time.Sleep(250 * time.Millisecond)
	}
	getExact(t, c.of(b), "before-the-flood", data)
	for _, nc := range conns {
		nc.Close()
	}
	conns = nil
	// Right after: nothing refuses a good peer.
	putRetry(t, c.of(a), "after-the-flood", data[:100<<10])
	getExact(t, c.of(c3), "after-the-flood", data[:100<<10])
	// a refused what one source parked past its bound, and counted it.
	if _, m := scrape(t, a, "/metrics"); sample(m, "hoplite_data_refused_total", `reason="parked_per_source"`) == 0 {
		t.Fatalf("1,024 parked Locates from one address and no refusal counted:\n%s", grepLines(m, "hoplite_data_refused_total"))
	}
	// The refusals were logged, not one line each.
	if n := strings.Count(a.stderr.String(), "refus"); n > 200 {
		t.Fatalf("%d log lines about refused connections: the log is not rate-limited", n)
	}
}

// controlRequest is a data-plane control request as a peer sends it
// (internal/transport/tcp_frame.go): magic "HPDC", protocol version 3, the kind,
// the body's length, the timeout in ms, no incarnation, then the body.
func controlRequest(kind byte, body []byte, timeout time.Duration) []byte {
	b := make([]byte, 32+len(body))
	copy(b, "HPDC")
	binary.BigEndian.PutUint16(b[4:], 3)
	b[6] = kind
	binary.BigEndian.PutUint32(b[8:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[12:], uint32(timeout.Milliseconds()))
	copy(b[32:], body)
	return b
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
