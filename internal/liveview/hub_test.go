package liveview

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/events"
)

// busyPeer is a member that publishes perCall large events between any
// two gatherings, for ever (events the Hub keeps one by one: not shard
// rebuilds, which it folds into one entry).
func busyPeer(id string, perCall int) (Peer, *atomic.Uint64) {
	rec := NewRecorder(id, 256, func() Status { return Status{Member: id, Capacity: 1 << 30} })
	var fetched atomic.Uint64
	pad := strings.Repeat("x", 4096)
	return Peer{ID: id, Fetch: func(_ context.Context, since uint64) (*Batch, error) {
		for range perCall {
			rec.Observe(&events.SenderSwitched{Object: pad, Receiver: id})
		}
		fetched.Add(1)
		b := rec.Since(since)
		return &b, nil
	}}, &fetched
}

// TestStalledClientDoesNotGrowTheFeed: a client that opens the feed and
// never reads. The hub keeps gathering (the members are never held up),
// its ring never holds more than its capacity, and once the client's
// socket is full its write times out and the client is dropped: nothing
// was queued for it.
func TestStalledClientDoesNotGrowTheFeed(t *testing.T) {
	peer, fetched := busyPeer("m1", 100)
	h := NewHub(HubConfig{Peers: func() []Peer { return []Peer{peer} }, Interval: 2 * time.Millisecond, Entries: 128,
		WriteTimeout: 200 * time.Millisecond})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096) // the stall shows after less
	}
	fmt.Fprintf(conn, "GET /feed HTTP/1.1\r\nHost: x\r\n\r\n")
	// Never read. Wait for the drop, checking the bound all along.
	end := time.Now().Add(60 * time.Second)
	for {
		s := h.Stats()
		if s.Entries > s.Capacity || s.Capacity != 128 {
			t.Fatalf("the ring holds %d of %d entries", s.Entries, s.Capacity)
		}
		if s.Dropped == 1 {
			if s.Published < 4*uint64(s.Capacity) {
				t.Fatalf("dropped after %d entries: the stall should have let the hub wrap its ring several times", s.Published)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the stalled client was never dropped: %+v (peer asked %d times)", s, fetched.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Dropped, it no longer counts; with no client left the gathering
	// stops (it costs the members nothing).
	end = time.Now().Add(10 * time.Second)
	for h.Stats().Clients != 0 {
		if time.Now().After(end) {
			t.Fatalf("the dropped client is still attached: %+v", h.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	n := fetched.Load()
	time.Sleep(50 * time.Millisecond) // 25 intervals: none may gather
	if m := fetched.Load(); m > n+1 {
		t.Fatalf("the hub went on gathering with no client: %d asks after %d", m, n)
	}
}

// TestSlowClientSkips: a cursor that fell more than a ring behind gets
// the ring's oldest entries and the count of those it missed, never more
// than one frame at a time.
func TestSlowClientSkips(t *testing.T) {
	h := NewHub(HubConfig{Entries: 100})
	for i := range 350 {
		h.appendLocked(Entry{Kind: "K", Data: json.RawMessage(fmt.Sprint(i))})
	}
	out, skipped, next := h.afterLocked(0)
	if skipped != 250 || len(out) != 100 || out[0].Seq != 251 || next != 350 {
		t.Fatalf("after 0: %d entries from %d, skipped %d, next %d", len(out), out[0].Seq, skipped, next)
	}
	if out, skipped, next = h.afterLocked(349); skipped != 0 || len(out) != 1 || next != 350 {
		t.Fatalf("after 349: %d entries, skipped %d, next %d", len(out), skipped, next)
	}
	if s := h.Stats(); s.Entries != 100 || s.Published != 350 {
		t.Fatalf("stats %+v", s)
	}
}

// TestRecorderRing: a member keeps its last entries; a gathering that
// fell behind learns how many it missed.
func TestRecorderRing(t *testing.T) {
	r := NewRecorder("m", 10, nil)
	for i := range 25 {
		r.Observe(&events.SenderSwitched{Object: fmt.Sprint(i)})
	}
	r.Observe("not an event the view shows")
	b := r.Since(0)
	if b.Last != 25 || b.Missed != 15 || len(b.Entries) != 10 || b.Entries[0].Seq != 16 || b.Entries[0].Member != "m" ||
		b.Entries[0].Kind != "SenderSwitched" {
		t.Fatalf("since 0: %+v", b)
	}
	if b := r.Since(25); len(b.Entries) != 0 || b.Last != 25 {
		t.Fatalf("since 25: %+v", b)
	}
	wire, err := r.Serve(EncodeRequest(20))
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeBatch(wire)
	if err != nil || len(got.Entries) != 5 || got.Last != 25 {
		t.Fatalf("on the wire: %+v %v", got, err)
	}
	if _, err := r.Serve([]byte("{")); err == nil {
		t.Fatal("a malformed request was answered")
	}
}

// TestFeedStreamsTheRing: a client reads the hub's hello, the entries
// gathered and the members' state.
func TestFeedStreamsTheRing(t *testing.T) {
	peer, _ := busyPeer("m1", 3)
	h := NewHub(HubConfig{Self: "m1", Peers: func() []Peer { return []Peer{peer} }, Interval: 5 * time.Millisecond})
	defer h.Close()
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/feed", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() && !(seen["hello"] && seen["entries"] && seen["state"]) {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			seen[name] = true
		}
	}
	if !(seen["hello"] && seen["entries"] && seen["state"]) {
		t.Fatalf("feed ended (%v) having sent %v", sc.Err(), seen)
	}
	var st stateFrame
	if err := json.Unmarshal(h.State(), &st); err != nil || len(st.Members) != 1 || st.Members[0].Health != "up" || st.Self != "m1" {
		t.Fatalf("state %s (%v)", h.State(), err)
	}
}
