package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/experiments"
)

func TestProfilePath(t *testing.T) {
	one := (&Options{Scenario: "broadcast", Sizes: []int64{1 << 10}}).groups()
	if got := profilePath("/p", one, one[0], 3, "cpu"); got != "/p/host-3-cpu.pb.gz" {
		t.Errorf("one comparison: %s", got)
	}
	two := (&Options{Scenario: "broadcast", Sizes: []int64{1 << 10, 32 << 20}}).groups()
	if got := profilePath("/p", two, two[1], 0, "heap"); got != "/p/broadcast-32MiB/host-0-heap.pb.gz" {
		t.Errorf("two comparisons: %s", got)
	}
	as := (&Options{Scenario: "async", Sizes: []int64{1 << 20}, Intervals: []time.Duration{0, 50 * time.Millisecond}}).groups()
	if got := profilePath("/p", as, as[1], 7, "block"); got != "/p/async-1MiB-every-0.05s/host-7-block.pb.gz" {
		t.Errorf("async: %s", got)
	}
	var kinds []string
	for _, rq := range windowRequests(10) {
		kinds = append(kinds, rq.kind)
		if !strings.HasSuffix(rq.path, "?seconds=10") || !strings.HasPrefix(rq.path, "/debug/pprof/") {
			t.Errorf("%s: %s", rq.kind, rq.path)
		}
	}
	kinds = append(kinds, heapRequest.kind)
	slices.Sort(kinds)
	want := slices.Clone(ProfileKinds)
	slices.Sort(want)
	if !slices.Equal(kinds, want) {
		t.Errorf("fetched kinds %v, want %v", kinds, want)
	}
}

// Under --profile ours's nodes, and only ours's, start with -pprof; the
// driver fetches from their manage port on their host's address.
func TestTestbedNodeArgsProfile(t *testing.T) {
	o, err := (&Options{Scenario: "reduce", Nodes: 2, Peers: []string{"naive"}, Degrees: []int{1}, Testbed: &Testbed{},
		Profile: "/tmp/p"}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.ProfileSeconds != defaultProfileSeconds {
		t.Errorf("ProfileSeconds %d, want the default %d", o.ProfileSeconds, defaultProfileSeconds)
	}
	tr := &testbedRun{o: o, tb: &Testbed{Hosts: []string{"198.18.3.1", "198.18.3.2"}, Namespaces: []string{"x-h0", "x-h1"}, Binary: "/bin/hoplite"}}
	for _, s := range o.systems() {
		args := tr.nodeArgs(1, s, "198.18.3.2:20002", 30002, []string{"198.18.3.1:30002"})
		if got := slices.Contains(args, "-pprof"); got != (s.name == SysOurs) {
			t.Errorf("%s: -pprof %v: %v", s.name, got, args)
		}
	}
	o.Profile = ""
	if args := tr.nodeArgs(0, o.systems()[0], "198.18.3.1:20002", 30002, nil); slices.Contains(args, "-pprof") {
		t.Errorf("ours without --profile: %v", args)
	}
	ns := &nodeSet{t: tr, manage: 30002}
	var _ pprofTarget = ns
	if got := ns.pprofURL(1); got != "http://198.18.3.2:30002" {
		t.Errorf("pprofURL %s", got)
	}
}

func TestProfileOptions(t *testing.T) {
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Scenario: "broadcast", Profile: "/tmp/p"}, "--profile needs --testbed"},
		{Options{Scenario: "broadcast", Profile: "/tmp/p", Testbed: &Testbed{}, TLS: true}, "--tls"},
		{Options{Scenario: "failure", Profile: "/tmp/p", Testbed: &Testbed{}}, "failure"},
		{Options{Scenario: "broadcast", Profile: "/tmp/p", Testbed: &Testbed{}, ProfileSeconds: MaxProfileSeconds + 1}, "--profile-seconds"},
		{Options{Scenario: "broadcast", Profile: "/tmp/p", Testbed: &Testbed{}, ProfileSeconds: -1}, "--profile-seconds"},
	} {
		if _, err := c.o.withDefaults(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
}

// fetchTo writes a 200's body and reports anything else; against Go's
// own handlers the windowed (delta) profiles are valid gzip.
func TestFetchTo(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no profiling here", http.StatusNotFound) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	c := pprofClient(1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	for _, rq := range append(windowRequests(1), heapRequest) {
		wg.Go(func() {
			err := fetchTo(ctx, c, srv.URL+rq.path, filepath.Join(dir, "sub", rq.kind+".pb.gz"))
			mu.Lock()
			errs[rq.kind] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, kind := range ProfileKinds {
		if errs[kind] != nil {
			t.Errorf("%s: %v", kind, errs[kind])
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, "sub", kind+".pb.gz"))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: not gzip: %v", kind, err)
			continue
		}
		if _, err := io.ReadAll(zr); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
	}
	err := fetchTo(ctx, c, srv.URL+"/fail", filepath.Join(dir, "fail.pb.gz"))
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no profiling here") {
		t.Errorf("a 404: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fail.pb.gz")); err == nil {
		t.Error("a 404's body was written as a profile")
	}
}

type profBackend struct {
	recBackend
}

func (profBackend) pprofURL(host int) string {
	return "http://198.18.250." + strconv.Itoa(host+1) + ":30002"
}

// The window opens at ours's first measured rep (after the warm-up) on
// every node; ours repeats, unrecorded, until it closes; only ours is
// profiled; the files are named by host and kind. (In-process backends
// stand in for the testbed's nodes, a fake fetch for their HTTP.)
func TestProfileWindow(t *testing.T) {
	rec := &recorder{}
	dir := t.TempDir()
	var mu sync.Mutex
	var urls []string
	putsAtOpen := -1
	o := Options{Scenario: "broadcast", Nodes: 3, Sizes: []int64{64 << 10}, Reps: 2, Warmup: 2, Peers: []string{"naive"},
		Bandwidth: Bandwidth{BitsPerSecond: 4e9}, OpTimeout: 20 * time.Second, Progress: io.Discard,
		Testbed: &Testbed{}, Profile: dir, ProfileSeconds: 1,
		newBackend: func(o *Options, s system, log *logrus.Logger) (backend, error) {
			b, err := openLocal(o, system{name: s.name, exp: experiments.Set{Naive: s.exp.Naive}}, log)
			if err != nil {
				return nil, err
			}
			return profBackend{recBackend{backend: b, r: rec, name: s.name}}, nil
		},
		profileFetch: func(ctx context.Context, url, path string) error {
			mu.Lock()
			urls = append(urls, url)
			if putsAtOpen < 0 {
				rec.mu.Lock()
				putsAtOpen = len(rec.puts)
				rec.mu.Unlock()
			}
			mu.Unlock()
			if strings.Contains(url, "seconds=1") {
				select { // the window
				case <-time.After(time.Second):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return os.WriteFile(path, []byte(url), 0o644)
		}}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	ours, naive := 0, 0
	for _, p := range rec.puts {
		switch p {
		case SysOurs:
			ours++
		case SysNaive:
			naive++
		}
	}
	if naive != o.Reps+o.Warmup {
		t.Errorf("naive ran %d reps, want %d", naive, o.Reps+o.Warmup)
	}
	// The window opens after ours's warm-up, before or as its first
	// measured rep's Put runs.
	if putsAtOpen != o.Warmup && putsAtOpen != o.Warmup+1 {
		t.Errorf("the window opened after %d of ours's Puts, want %d (the warm-up)", putsAtOpen, o.Warmup)
	}
	note := strings.Join(r.Notes, "\n")
	m := regexp.MustCompile(`profile: broadcast 64KiB ours: the 1 s window held 2 measured reps \([0-9.]+ s\) and (\d+) unrecorded ones; 15 files in `).FindStringSubmatch(note)
	if m == nil {
		t.Fatalf("notes %q", r.Notes)
	}
	fill, _ := strconv.Atoi(m[1])
	if fill < 1 || ours != o.Warmup+o.Reps+fill {
		t.Errorf("ours ran %d Puts: %d warm-up, %d measured, %d to fill the window", ours, o.Warmup, o.Reps, fill)
	}
	for _, res := range r.Results {
		if !res.ok() || len(res.Times) != o.Reps {
			t.Errorf("%s: %s %q, times %v: want %d recorded", res.System, res.Status, res.Reason, res.Times, o.Reps)
		}
	}
	if len(urls) != 3*len(ProfileKinds) {
		t.Errorf("%d fetches, want %d: %v", len(urls), 3*len(ProfileKinds), urls)
	}
	for h := 0; h < 3; h++ {
		for _, kind := range ProfileKinds {
			b, err := os.ReadFile(filepath.Join(dir, "host-"+strconv.Itoa(h)+"-"+kind+".pb.gz"))
			if err != nil {
				t.Error(err)
				continue
			}
			if !strings.HasPrefix(string(b), "http://198.18.250."+strconv.Itoa(h+1)+":30002/debug/pprof/") {
				t.Errorf("host %d %s from %s", h, kind, b)
			}
		}
	}
	// The heap comes after the window.
	mu.Lock()
	defer mu.Unlock()
	for i, u := range urls {
		if strings.Contains(u, "/heap") && i < 3*len(windowRequests(1)) {
			t.Errorf("the heap was fetched in the window: %v", urls)
			break
		}
	}
}
