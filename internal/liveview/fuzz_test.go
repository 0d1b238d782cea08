package liveview

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// FuzzRecorderServe hands any request from the wire to a member's
// recorder (another member's gathering, messages.ControlLive): never a
// panic; a request that is not JSON is an INVALID_ARGUMENT error; an
// answer is a Batch.
func FuzzRecorderServe(f *testing.F) {
	f.Add([]byte(`{"since":0}`))
	f.Add([]byte(`{"since":18446744073709551615}`))
	f.Add([]byte(`{"since":-1}`))
	f.Add([]byte(`{"since":1e400}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	r := NewRecorder("m1", 4, nil)
	for range 6 {
		r.Observe(&messages.ObjectInfo{ObjectId: "x"}) // not an event it records: Observe must shrug
	}
	f.Fuzz(func(t *testing.T, req []byte) {
		out, err := r.Serve(req)
		if err != nil {
			var me *messages.Error
			if !errors.As(err, &me) || me.Code != messages.ErrorCode_INVALID_ARGUMENT {
				t.Fatalf("Serve(%q): %v, want an INVALID_ARGUMENT error", req, err)
			}
			return
		}
		if _, err := DecodeBatch(out); err != nil {
			t.Fatalf("Serve(%q) answered what DecodeBatch refuses: %v", req, err)
		}
	})
}

// FuzzHubBatch hands any answer of a peer (the bytes of its Batch) to a
// Hub's gathering: never a panic; the state the Hub then serves is JSON.
func FuzzHubBatch(f *testing.F) {
	f.Add([]byte(`{"member":"b","last":3,"status":{"member":"b","capacity":10,"used":20,"copies":[{"id":"x","size":-1}]},"entries":[{"seq":1,"member":"b","at":5,"kind":"NodeFailed","data":{"Node":"c"}}]}`))
	f.Add([]byte(`{"member":"b","entries":[{"kind":"ShardRebuilt","data":{"shard":-1,"from":"c","to":"b"}},{"kind":"ShardRebuilt","data":null}]}`))
	f.Add([]byte(`{"member":"b","entries":[{"kind":"BarrierTookOver","data":{"barrier":"x","from":"","to":"b"}},{"kind":"BarrierTookOver","data":"x"}]}`))
	f.Add([]byte(`{"member":"b","entries":[{"kind":"NodeFailed","at":-9223372036854775808,"data":{"Node":"b"}}]}`))
	f.Add([]byte(`{"status":{"barriers":[{"id":"x"}]}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		batch, err := DecodeBatch(b)
		if err != nil {
			return
		}
		self := func(context.Context, uint64) (*Batch, error) { return &Batch{Member: "a"}, nil }
		peer := func(context.Context, uint64) (*Batch, error) { return batch, nil }
		h := NewHub(HubConfig{Self: "a", Entries: 8, Peers: func() []Peer {
			return []Peer{{ID: "a", Fetch: self}, {ID: "b", Fetch: peer}}
		}})
		defer h.Close()
		h.Gather()
		h.Gather() // the same news again: a peer that repeats itself
		if !json.Valid(h.State()) {
			t.Fatalf("state after %q is not JSON: %q", b, h.State())
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/state", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /state: %d", rec.Code)
		}
	})
}

// FuzzHubHTTP sends any method and path to a Hub (what the manage port
// serves under /live/): never a panic nor a 5xx.
func FuzzHubHTTP(f *testing.F) {
	for _, p := range []string{"", "/", "/app.js", "/style.css", "/state", "/feed", "/../x", "/%00", "//state"} {
		f.Add(http.MethodGet, p)
	}
	f.Add(http.MethodPost, "/state")
	f.Add("BREW", "/")
	h := NewHub(HubConfig{Self: "a"})
	f.Cleanup(h.Close)
	f.Fuzz(func(t *testing.T, method, path string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // a feed ends at once: its client is gone
		r := (&http.Request{Method: method, URL: &url.URL{Path: path}, Header: http.Header{}, Proto: "HTTP/1.1",
			ProtoMajor: 1, ProtoMinor: 1, Host: "x"}).WithContext(ctx)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code >= 500 && !(path == "/feed" && rec.Code == http.StatusServiceUnavailable) {
			t.Fatalf("%s %q: %d", method, path, rec.Code)
		}
	})
}
