package liveview

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"time"
)

//go:embed assets
var assets embed.FS

// keepAlive is how often an idle feed writes a comment line: proxies and
// browsers keep a stream that speaks.
const keepAlive = 15 * time.Second

// ServeHTTP serves the page at "/" (with its script and style), the feed
// at "/feed" (server-sent events: hello, entries, state, skipped) and the
// last state at "/state" (JSON). Mount it under a prefix with
// http.StripPrefix; the page's URLs are relative.
func (h *Hub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "the live view is read-only", http.StatusMethodNotAllowed)
		return
	}
	switch r.URL.Path {
	case "", "/":
		if r.URL.Path == "" {
			// Relative URLs need the trailing slash.
			http.Redirect(w, r, "live/", http.StatusFound)
			return
		}
		h.file(w, "index.html", "text/html; charset=utf-8")
	case "/app.js":
		h.file(w, "app.js", "text/javascript; charset=utf-8")
	case "/style.css":
		h.file(w, "style.css", "text/css; charset=utf-8")
	case "/feed":
		h.serveFeed(w, r)
	case "/state":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(h.State())
	default:
		http.NotFound(w, r)
	}
}

func (h *Hub) file(w http.ResponseWriter, name, ctype string) {
	b, err := fs.ReadFile(assets, "assets/"+name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

// hello is the feed's first event: which hub (a new one is another
// cluster or another incarnation of the member: the page starts over).
type hello struct {
	Hub      string `json:"hub"`
	Self     string `json:"self"`
	Capacity int    `json:"capacity"`
}

// serveFeed streams the ring from its oldest entry, then every
// gathering's news, from the client's own cursor: nothing is queued per
// client. A write that blocks past WriteTimeout drops the client.
func (h *Hub) serveFeed(w http.ResponseWriter, r *http.Request) {
	if !h.attach() {
		http.Error(w, "too many live view clients", http.StatusServiceUnavailable)
		return
	}
	defer h.detach()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // the request is read; the stream lasts
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	var buf bytes.Buffer
	event := func(name string, data []byte) {
		fmt.Fprintf(&buf, "event: %s\ndata: ", name)
		buf.Write(data)
		buf.WriteString("\n\n")
	}
	hb, _ := json.Marshal(hello{Hub: h.id, Self: h.cfg.Self, Capacity: len(h.ring)})
	event("hello", hb)
	var cursor uint64
	var lastState []byte
	for {
		h.mu.Lock()
		tick := h.tick
		entries, skipped, next := h.afterLocked(cursor)
		more := next < h.last
		state := h.state
		h.mu.Unlock()
		if skipped > 0 {
			h.skipped.Add(skipped)
			event("skipped", []byte(fmt.Sprint(skipped)))
		}
		if len(entries) > 0 {
			if b, err := json.Marshal(entries); err == nil {
				event("entries", b)
			}
		}
		if !more && !bytes.Equal(state, lastState) {
			event("state", state)
			lastState = state
		}
		cursor = next
		if buf.Len() > 0 {
			if !h.write(w, rc, buf.Bytes()) {
				return
			}
			buf.Reset()
		}
		if more {
			continue
		}
		select {
		case <-tick:
		case <-r.Context().Done():
			return
		case <-h.done:
			return
		case <-time.After(keepAlive):
			buf.WriteString(": keep-alive\n\n")
		}
	}
}

// write sends b to the client under the write timeout; false: the
// client is dropped.
func (h *Hub) write(w http.ResponseWriter, rc *http.ResponseController, b []byte) bool {
	_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.WriteTimeout))
	_, err := w.Write(b)
	if err == nil {
		err = rc.Flush()
	}
	if err != nil {
		h.dropped.Add(1)
		return false
	}
	return true
}
