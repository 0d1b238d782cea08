package member

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/liveview"
	"github.com/hoplite-go/hoplite/internal/testutil"
)

// TestLocalLiveViewFeed: an embedded cluster with Config.UI serves the
// live view; its feed carries each receiver's stream of a broadcast
// (TransferStarted from a sender to that receiver) and every member's
// status.
func TestLocalLiveViewFeed(t *testing.T) {
	l, err := StartLocal(Config{Nodes: 3, Log: quietLog(), UI: "127.0.0.1:0", ChunkSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	base := "http://" + l.UIAddr() + "/live/"
	page, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("page: %s %s", page.Status, page.Header.Get("Content-Type"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"feed", nil)
	feed, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Body.Close()

	data := testutil.RandomBytes(3, 1<<20)
	if err := l.Client(0).Put(ctx, "seen", data); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		if _, err := l.Client(i).Get(ctx, "seen"); err != nil {
			t.Fatal(err)
		}
	}
	// Every receiver's stream is in the feed, from a member to it.
	want := map[string]bool{l.Member(1).ID(): true, l.Member(2).ID(): true}
	members := 0
	sc := bufio.NewScanner(feed.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var event string
	for (len(want) > 0 || members < 3) && sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			event = name
			continue
		}
		payload, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch event {
		case "entries":
			var es []liveview.Entry
			if err := json.Unmarshal([]byte(payload), &es); err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				var d struct{ Object, Sender, Receiver string }
				if e.Kind == "TransferStarted" && json.Unmarshal(e.Data, &d) == nil && d.Object == "seen" {
					if d.Sender == d.Receiver || l.IndexOf(d.Sender) < 0 || e.Member != d.Receiver {
						t.Fatalf("stream %+v published by %s", d, e.Member)
					}
					delete(want, d.Receiver)
				}
			}
		case "state":
			var f struct{ Members []liveview.Status }
			if err := json.Unmarshal([]byte(payload), &f); err != nil {
				t.Fatal(err)
			}
			members = 0
			for _, m := range f.Members {
				if m.Health == "up" && m.Capacity > 0 {
					members++
				}
			}
		}
	}
	if len(want) > 0 || members < 3 {
		t.Fatalf("feed ended (%v): receivers without a stream %v, %d members up", sc.Err(), want, members)
	}
}
