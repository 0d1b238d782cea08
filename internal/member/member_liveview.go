package member

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo"

	"github.com/hoplite-go/hoplite/internal/liveview"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/messages"
)

// newLiveState makes the member's recorder and hub, before its manage
// port serves anything; the hub gathers only while a browser is
// attached, and nothing is asked of the member before its data plane
// serves (data set).
func newLiveState(m *Member) *liveState {
	v := &liveState{}
	v.rec = liveview.NewRecorder(m.id, 0, func() liveview.Status { return m.liveStatus(v) })
	v.hub = liveview.NewHub(liveview.HubConfig{Self: m.id, Peers: m.livePeers})
	return v
}

// startView records the member's events from now on.
func (m *Member) startView() {
	m.subs = append(m.subs, m.system.EventStream.Subscribe(m.liveView.rec.Observe))
}

// liveStatus is the member as the live view shows it.
func (m *Member) liveStatus(v *liveState) liveview.Status {
	data := v.data.Load()
	if data == nil {
		return liveview.Status{Member: m.id, At: time.Now().UnixMilli()} // starting
	}
	return storeStatus(m.id, m.system.Address(), data, m.store, func() (time.Duration, float64) {
		l, b, _, _ := m.estimator.Estimate()
		return l, b
	})
}

// storeStatus is a member's Status from its store and its estimates.
func storeStatus(id, addr string, data *string, store *objstore.Store, estimate func() (time.Duration, float64)) liveview.Status {
	u := store.Usage()
	s := liveview.Status{Member: id, Address: addr, At: time.Now().UnixMilli(), Capacity: u.Capacity, Used: u.Used,
		Pinned: u.Pinned, Objects: u.Objects}
	if data != nil {
		s.Data = *data
	}
	l, b := estimate()
	s.LatencyNs, s.Bandwidth = int64(l), b
	var copies []liveview.Copy
	for _, o := range store.Objects() {
		w, done, err := o.Progress()
		if err != nil {
			continue
		}
		copies = append(copies, liveview.Copy{ID: o.ID(), Size: o.Size(), Written: w, Complete: done, Pinned: o.Pinned()})
	}
	s.Copies = liveview.StoreCopies(copies)
	return s
}

// livePeers are the members the hub gathers from: this one (a call) and
// every member it can reach (a control request on the data plane).
func (m *Member) livePeers() []liveview.Peer {
	v := m.liveView
	out := []liveview.Peer{{ID: m.id, Fetch: func(_ context.Context, since uint64) (*liveview.Batch, error) {
		b := v.rec.Since(since)
		return &b, nil
	}}}
	if v.data.Load() == nil {
		return out // starting: m.data is not set yet
	}
	caller := m.data
	idx := m.peers.Load()
	if caller == nil || idx == nil {
		return out
	}
	for id, addr := range idx.byID {
		data := idx.dataOf[addr]
		if data == "" {
			continue
		}
		out = append(out, liveview.Peer{ID: id, Fetch: func(ctx context.Context, since uint64) (*liveview.Batch, error) {
			b, err := caller.Call(ctx, data, messages.ControlLive, liveview.EncodeRequest(since))
			if err != nil {
				return nil, err
			}
			return liveview.DecodeBatch(b)
		}})
	}
	slices.SortFunc(out[1:], func(a, b liveview.Peer) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// serveLive answers another member's gathering (messages.ControlLive).
func (m *Member) serveLive(req []byte) ([]byte, error) {
	return m.liveView.rec.Serve(req)
}

// liveRoutes serves the live view at /live/ on the manage port, under
// its TLS rule. The hub's feed needs the connection's own writer (write
// deadlines, flushes), which echo's Response does not pass on.
func (m *Member) liveRoutes(e *echo.Echo) {
	h := func(c echo.Context) error {
		v := m.liveView
		r := c.Request()
		r2 := r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/live")
		r2.URL.RawPath = ""
		v.hub.ServeHTTP(c.Response().Writer, r2)
		return nil
	}
	e.GET("/live", h)
	e.GET("/live/*", h)
}

// LiveView is the member's live view (what its manage port serves at
// /live/): mount it elsewhere with http.StripPrefix.
func (m *Member) LiveView() http.Handler {
	return m.liveView.hub
}
