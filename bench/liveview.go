package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// SysOursUI is ours with the live view watched (--peers ui): from the
// start of each repetition to its end a client reads host 0's live view
// feed (/live/feed on its manage port) the way the page does, so that
// host 0's hub gathers every member's news every 250 ms while the
// operation runs. Its ratio to ours is what watching the cluster costs
// the data plane.
const SysOursUI = "ours-ui"

// uiSystems is the ours-ui column when the peers ask for it.
func (o *Options) uiSystems() []system {
	for _, p := range o.Peers {
		if p == "ui" {
			return []system{{name: SysOursUI}}
		}
	}
	return nil
}

// openWatched opens s's cluster as ours's and watches its live view
// during each repetition (SysOursUI).
func (r *runner) openWatched(ctx context.Context, s system) (backend, error) {
	w := &watchedBackend{r: r, name: s.name}
	var err error
	switch {
	case r.tb != nil:
		var ns backend
		if ns, err = r.tb.open(ctx, s); err != nil {
			return nil, err
		}
		w.backend = ns
		set := ns.(*nodeSet)
		w.feed = "http://" + net.JoinHostPort(r.tb.tb.Hosts[0], strconv.Itoa(set.manage)) + "/live/feed"
	default:
		var lb *localBackend
		if lb, err = openLocal(r.o, s, r.log); err != nil {
			return nil, err
		}
		w.backend = lb
		// What host 0's manage port serves at /live/: its member's view.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			lb.Close()
			return nil, err
		}
		w.srv = &http.Server{Handler: lb.l.Member(0).LiveView(), ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = w.srv.Serve(ln) }()
		w.feed = "http://" + ln.Addr().String() + "/feed"
	}
	return w, nil
}

// watchedBackend is a backend whose live view a client reads from each
// repetition's first Prepare to its Delete. Between repetitions nobody
// watches, so that the hub of an idle ours-ui cluster does not gather
// while ours's repetitions run beside it.
type watchedBackend struct {
	backend
	r    *runner
	name string
	feed string
	srv  *http.Server // in process: host 0's view, served here

	mu sync.Mutex
	w  *feedReader
	// Over the backend's life: repetitions watched, and what the client
	// read.
	attaches, frames, entries, bytes int
}

func (b *watchedBackend) Prepare(ctx context.Context, host int, d DataSpec) error {
	if err := b.attach(ctx); err != nil {
		return err
	}
	return b.backend.Prepare(ctx, host, d)
}

// Delete ends a repetition: the client leaves once the view caught up
// with it (a gathering that began after the operation ended), as a page
// left open would have.
func (b *watchedBackend) Delete(ctx context.Context, ids []string) {
	b.backend.Delete(ctx, ids)
	b.mu.Lock()
	w := b.w
	b.mu.Unlock()
	if w != nil {
		w.awaitStates(ctx, 2)
	}
	b.detach()
}

func (b *watchedBackend) Close() {
	b.detach()
	if b.srv != nil {
		_ = b.srv.Close()
	}
	b.backend.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.attaches > 0 {
		b.r.note(fmt.Sprintf("%s: a client read host 0's live view feed during %d repetitions (warm-ups included): %d frames, %d events, %.1f KiB",
			b.name, b.attaches, b.frames, b.entries, float64(b.bytes)/1024))
	}
}

func (b *watchedBackend) attach(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		return nil
	}
	w, err := readFeed(ctx, b.feed)
	if err != nil {
		return fmt.Errorf("%s: the live view: %w", b.name, err)
	}
	b.w = w
	b.attaches++
	return nil
}

func (b *watchedBackend) detach() {
	b.mu.Lock()
	w := b.w
	b.w = nil
	b.mu.Unlock()
	if w == nil {
		return
	}
	frames, entries, n := w.stop()
	b.mu.Lock()
	b.frames += frames
	b.entries += entries
	b.bytes += n
	b.mu.Unlock()
}

// feedReader reads a live view feed as the page does: every frame, the
// entries decoded.
type feedReader struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu                    sync.Mutex
	frames, entries, read int
	stated                chan struct{} // closed at the next state frame
}

// awaitStates waits for n more state frames (each ends one gathering),
// at most 5 s.
func (f *feedReader) awaitStates(ctx context.Context, n int) {
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for range n {
		f.mu.Lock()
		ch := f.stated
		f.mu.Unlock()
		select {
		case <-ch:
		case <-f.done:
			return
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// feedClient reads the feed straight from the member, whatever proxy
// the environment names: the testbed's hosts are on its own bridge.
var feedClient = &http.Client{Transport: &http.Transport{Proxy: nil}}

// readFeed opens url (a live view's /feed) and returns once the first
// state frame came: the hub is gathering.
func readFeed(ctx context.Context, url string) (*feedReader, error) {
	rctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	res, err := feedClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		res.Body.Close()
		cancel()
		return nil, fmt.Errorf("GET %s: %s (%s)", url, res.Status, res.Header.Get("Content-Type"))
	}
	f := &feedReader{cancel: cancel, done: make(chan struct{}), stated: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(f.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		event, signalled := "", false
		for sc.Scan() {
			line := sc.Text()
			f.mu.Lock()
			f.read += len(line) + 1
			f.mu.Unlock()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				n := 0
				if event == "entries" {
					var es []json.RawMessage
					if json.Unmarshal([]byte(line[len("data: "):]), &es) == nil {
						n = len(es)
					}
				}
				f.mu.Lock()
				f.frames++
				f.entries += n
				if event == "state" {
					close(f.stated)
					f.stated = make(chan struct{})
				}
				f.mu.Unlock()
				if event == "state" && !signalled {
					close(ready)
					signalled = true
				}
			}
		}
	}()
	select {
	case <-ready:
		return f, nil
	case <-f.done:
		cancel()
		return nil, errors.New("the feed ended before its first state frame")
	case <-time.After(10 * time.Second):
		f.stop()
		return nil, errors.New("no state frame within 10 s")
	case <-ctx.Done():
		f.stop()
		return nil, ctx.Err()
	}
}

// stop closes the feed and returns what was read.
func (f *feedReader) stop() (frames, entries, bytes int) {
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.frames, f.entries, f.read
}
