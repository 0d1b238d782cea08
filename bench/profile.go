package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Profiling a testbed run (Options.Profile): ours's nodes start with
// -pprof (Go's /debug/pprof on the manage port, mutex and block
// profiling on), and for each comparison the driver opens one window of
// Options.ProfileSeconds just before ours's first measured repetition. In
// it every node records, at once,
//
//	cpu     /debug/pprof/profile?seconds=S
//	allocs  /debug/pprof/allocs?seconds=S   (a delta: the window's allocations only)
//	mutex   /debug/pprof/mutex?seconds=S    (a delta)
//	block   /debug/pprof/block?seconds=S    (a delta)
//
// and once the window has closed
//
//	heap    /debug/pprof/heap?gc=1          (in use after a GC; its alloc_* are since the start)
//
// into DIR/host-H-KIND.pb.gz (DIR/<comparison>/host-H-KIND.pb.gz with
// several sizes or intervals). If ours's measured repetitions end before
// the window closes, ours keeps repeating the same operation, unrecorded,
// until it does: the profiles hold the workload and no idle tail. If they
// outlast it, the profiles cover the first S seconds of them; the report's
// notes say which happened.

// ProfileKinds are the profiles fetched from every node.
var ProfileKinds = []string{"cpu", "heap", "allocs", "mutex", "block"}

// MaxProfileSeconds bounds Options.ProfileSeconds: a node's manage port
// writes a response for at most 2 minutes (cluster's WriteTimeout), and
// net/http/pprof refuses a window that long.
const MaxProfileSeconds = 100

// defaultProfileSeconds is Options.ProfileSeconds's default.
const defaultProfileSeconds = 10

// maxFillReps bounds the unrecorded repetitions that fill a window.
const maxFillReps = 1_000_000

// pprofTarget is a backend whose nodes serve /debug/pprof (the testbed's
// nodes of ours under --profile).
type pprofTarget interface {
	// pprofURL is host's manage port, "http://IP:PORT".
	pprofURL(host int) string
}

// profilePath is the file of host's profile kind for comparison g of
// groups: DIR/host-H-KIND.pb.gz, in a directory of g's own when the run
// has several comparisons.
func profilePath(dir string, groups []group, g group, host int, kind string) string {
	name := fmt.Sprintf("host-%d-%s.pb.gz", host, kind)
	if len(groups) > 1 {
		return filepath.Join(dir, strings.ReplaceAll(g.label(), " ", "-"), name)
	}
	return filepath.Join(dir, name)
}

// profileRequest is one fetch: its URL path and query, and its kind.
type profileRequest struct {
	kind string
	path string
}

// windowRequests are the fetches that last the window, heapRequest the
// one after it.
func windowRequests(seconds int) []profileRequest {
	q := fmt.Sprintf("?seconds=%d", seconds)
	return []profileRequest{
		{"cpu", "/debug/pprof/profile" + q},
		{"allocs", "/debug/pprof/allocs" + q},
		{"mutex", "/debug/pprof/mutex" + q},
		{"block", "/debug/pprof/block" + q},
	}
}

var heapRequest = profileRequest{"heap", "/debug/pprof/heap?gc=1"}

// profileWindow is one comparison's profiling in flight.
type profileWindow struct {
	start   time.Time
	seconds int
	closed  chan struct{} // every windowed request has returned
	mu      sync.Mutex
	errs    []error
	files   []string
	wg      sync.WaitGroup
	fetch   func(ctx context.Context, url, path string) error
	targets []string
	paths   func(host int, kind string) string
}

// pprofClient fetches from the nodes: no proxy (the nodes are on the
// testbed's bridge), each request bounded.
func pprofClient(seconds int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, ResponseHeaderTimeout: time.Duration(seconds)*time.Second + 60*time.Second},
		Timeout:   time.Duration(seconds)*time.Second + 90*time.Second,
	}
}

// fetchTo GETs url into path (only a 200's body is a profile).
func fetchTo(ctx context.Context, c *http.Client, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, res.Status, strings.TrimSpace(string(msg)))
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// startProfileWindow opens the window on every target (base URLs, host
// order): the windowed requests now, the heap once they have all
// returned. wait waits for everything.
func startProfileWindow(ctx context.Context, targets []string, seconds int, paths func(host int, kind string) string,
	fetch func(ctx context.Context, url, path string) error) *profileWindow {
	w := &profileWindow{start: time.Now(), seconds: seconds, closed: make(chan struct{}), fetch: fetch, targets: targets, paths: paths}
	var windowed sync.WaitGroup
	for h, base := range targets {
		for _, rq := range windowRequests(seconds) {
			windowed.Add(1)
			go func() {
				defer windowed.Done()
				w.get(ctx, h, base, rq)
			}()
		}
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		windowed.Wait()
		close(w.closed)
		var heaps sync.WaitGroup
		for h, base := range targets {
			heaps.Go(func() { w.get(ctx, h, base, heapRequest) })
		}
		heaps.Wait()
	}()
	return w
}

func (w *profileWindow) get(ctx context.Context, h int, base string, rq profileRequest) {
	path := w.paths(h, rq.kind)
	err := w.fetch(ctx, base+rq.path, path)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.errs = append(w.errs, fmt.Errorf("host %d %s: %w", h, rq.kind, err))
		return
	}
	w.files = append(w.files, path)
}

// isClosed says whether every windowed request has returned.
func (w *profileWindow) isClosed() bool {
	select {
	case <-w.closed:
		return true
	default:
		return false
	}
}

// wait waits for every fetch; it returns the files written and what
// failed.
func (w *profileWindow) wait() ([]string, error) {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.files, errors.Join(w.errs...)
}

// profiles says whether system si is profiled (ours, under --profile).
func (r *runner) profiles(si int) bool {
	return r.o.Profile != "" && r.systems[si].name == SysOurs && r.o.Scenario != "failure"
}

// startProfile opens comparison gi's window on backend b's nodes; nil
// (with a note) when b serves no profiles.
func (r *runner) startProfile(ctx context.Context, b backend, gi int) *profileWindow {
	t, ok := b.(pprofTarget)
	if !ok {
		r.note(fmt.Sprintf("%s ours: not profiled: its nodes serve no /debug/pprof", r.groups[gi].label()))
		return nil
	}
	var targets []string
	for h := 0; h < r.o.Nodes; h++ {
		targets = append(targets, t.pprofURL(h))
	}
	fetch := r.o.profileFetch
	if fetch == nil {
		c := pprofClient(r.o.ProfileSeconds)
		fetch = func(ctx context.Context, url, path string) error { return fetchTo(ctx, c, url, path) }
	}
	g := r.groups[gi]
	r.prog.logf("profile: %s ours: a %d s window on %d nodes from the first measured rep", g.label(), r.o.ProfileSeconds, len(targets))
	return startProfileWindow(ctx, targets, r.o.ProfileSeconds,
		func(h int, kind string) string { return profilePath(r.o.Profile, r.groups, g, h, kind) }, fetch)
}

// finishProfile keeps ours repeating (unrecorded) until w's window has
// closed, then waits for the profiles and notes what the window held:
// measured is how long the measured repetitions took from the window's
// start, reps how many there were.
func (r *runner) finishProfile(ctx context.Context, w *profileWindow, b backend, gi, si, reps int, measured time.Duration) {
	label := r.groups[gi].label()
	fill := 0
	if !w.isClosed() && ctx.Err() == nil {
		r.prog.logf("profile: %s ours: %d measured reps took %.2f s; repeating unrecorded until the %d s window closes",
			label, reps, measured.Seconds(), w.seconds)
	}
	failed := r.failed[gi][si]
	for ; fill < maxFillReps && !w.isClosed() && ctx.Err() == nil && r.runnable(gi, si) && r.failed[gi][si] == failed; fill++ {
		r.measure(ctx, b, gi, si, r.o.Reps+fill, 0)
	}
	files, err := w.wait()
	var note string
	switch {
	case measured >= time.Duration(w.seconds)*time.Second:
		note = fmt.Sprintf("profile: %s ours: the %d s window covered the first %d s of %.2f s of %d measured reps",
			label, w.seconds, w.seconds, measured.Seconds(), reps)
	default:
		note = fmt.Sprintf("profile: %s ours: the %d s window held %d measured reps (%.2f s) and %d unrecorded ones",
			label, w.seconds, reps, measured.Seconds(), fill)
	}
	note += fmt.Sprintf("; %d files in %s", len(files), r.o.Profile)
	if err != nil {
		note += fmt.Sprintf("; failed: %v", err)
	}
	r.note(note)
}

func (r *runner) note(s string) {
	r.notes = append(r.notes, s)
	r.prog.logf("%s", s)
}
