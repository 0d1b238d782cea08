package member

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/hoplite-go/hoplite/internal/liveview"
	"github.com/hoplite-go/hoplite/messages"
)

// localUI is an embedded cluster's live view server (Config.UI).
type localUI struct {
	hub  *liveview.Hub
	srv  *http.Server
	addr string
}

// serveUI serves the live view of an embedded cluster at addr: its hub
// gathers from the members live, as members says, in process.
func serveUI(addr string, members func() []*Member) (*localUI, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "live view address %s is not available: %v", addr, err)
	}
	hub := liveview.NewHub(liveview.HubConfig{Peers: func() []liveview.Peer {
		var out []liveview.Peer
		for _, m := range members() {
			rec := m.liveView.rec
			out = append(out, liveview.Peer{ID: m.id, Fetch: func(_ context.Context, since uint64) (*liveview.Batch, error) {
				b := rec.Since(since)
				return &b, nil
			}})
		}
		return out
	}})
	mux := http.NewServeMux()
	mux.Handle("/live/", http.StripPrefix("/live", hub))
	mux.Handle("/", http.RedirectHandler("/live/", http.StatusFound))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = srv.Serve(ln) }()
	return &localUI{hub: hub, srv: srv, addr: ln.Addr().String()}, nil
}

func (u *localUI) close() {
	u.hub.Close()
	_ = u.srv.Close()
}
