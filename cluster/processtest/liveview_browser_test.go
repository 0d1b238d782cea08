package processtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hoplite-go/hoplite/messages"
)

// chromiumInstall is how the project's own setup (.ci/run) installs
// the browser the live view's test drives.
const chromiumInstall = "apt-get update && apt-get install -y chromium"

// chromiumPath finds Debian's Chromium (HOPLITE_CHROMIUM names another).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HOPLITE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("the live view's browser test needs Chromium, which is not installed: run `%s` (or set HOPLITE_CHROMIUM to a Chromium binary)", chromiumInstall)
	return ""
}

// newBrowser starts headless Chromium for t: no sandbox (tests run as
// root), nothing that reaches for the network on its own (with none but
// the package registries, its start stalls on refused connections), a
// fresh profile.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1500, 1900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first action starts the browser, bound to the context it is
	// given for its whole life: a deadline on it would end the browser.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start Chromium: %v", err)
		}
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("Chromium did not start within 30 s")
	}
	return ctx
}

// liveDOM is what the live view's page shows, read from its DOM.
type liveDOM struct {
	Conn    string `json:"conn"`
	Members []struct {
		ID, Health string
	} `json:"members"`
	Edges []struct {
		Object, From, To, State string
		Failover                bool
	} `json:"edges"`
	Switches []struct {
		Object, Receiver, From, To string
	} `json:"switches"`
	Positions []struct {
		Reduce, Object, Node, State string
		Position                    int
		Repaired                    bool
	} `json:"positions"`
	Repairs []struct {
		Reduce, Failed, Replacement string
		Position                    int
	} `json:"repairs"`
}

const readDOM = `(() => {
  const all = (s) => [...document.querySelectorAll(s)];
  return {
    conn: document.querySelector('#conn').dataset.state,
    members: all('#members tr[data-member]').map(e => ({ID: e.dataset.member, Health: e.dataset.health})),
    edges: all('#broadcasts g[data-edge]').map(e => ({Object: e.dataset.object, From: e.dataset.from, To: e.dataset.to,
      State: e.dataset.state, Failover: e.dataset.failover === '1'})),
    switches: all('#broadcasts [data-switch]').map(e => ({Object: e.closest('[data-object]').dataset.object,
      Receiver: e.dataset.receiver, From: e.dataset.from, To: e.dataset.to})),
    positions: all('#reduces g.pos').map(e => ({Reduce: e.dataset.reduce, Position: Number(e.dataset.position),
      Object: e.dataset.object || '', Node: e.dataset.node || '', State: e.dataset.state, Repaired: e.dataset.repaired === '1'})),
    repairs: all('#reduces [data-repair]').map(e => ({Reduce: e.dataset.reduce, Position: Number(e.dataset.position),
      Failed: e.dataset.failed, Replacement: e.dataset.replacement || ''})),
  };
})()`

// page is the live view open in the browser.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p *page) dom() (liveDOM, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[liveDOM](readDOM))
}

// wait reads the page until cond holds, failing after 20 s with what
// the page showed last (and its screenshot).
func (p *page) wait(what string, cond func(liveDOM) bool) liveDOM {
	p.t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		d, err := p.dom()
		if err == nil && cond(d) {
			return d
		}
		if time.Now().After(end) {
			p.screenshot("failed.png")
			b, _ := json.MarshalIndent(d, "", " ")
			p.t.Fatalf("the live view never showed %s (%v); it showed:\n%s", what, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// screenshot saves the whole page as name in the test's artifact
// directory (go test -artifacts keeps it), and where
// HOPLITE_LIVEVIEW_SCREENSHOT says.
func (p *page) screenshot(name string) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	paths := []string{filepath.Join(p.t.ArtifactDir(), name)}
	if dst := os.Getenv("HOPLITE_LIVEVIEW_SCREENSHOT"); dst != "" && name == "live-view.png" {
		paths = append(paths, dst)
	}
	for _, path := range paths {
		if err := os.WriteFile(path, png, 0o644); err != nil {
			p.t.Errorf("screenshot: %v", err)
			continue
		}
		p.t.Logf("screenshot: %s", path)
	}
}

// TestLiveViewInABrowser: four `hoplite node` processes and the live view
// of the first, open in headless Chromium. A 16 MiB broadcast loses a
// relaying receiver to SIGKILL mid-transfer, and a Reduce loses a source's
// member; the page shows every stream the directory records with its
// endpoints, the failover stream, the reduce tree's positions as the
// Reduce placed them and its repair, and both killed members failed.
func TestLiveViewInABrowser(t *testing.T) {
	bin := hopliteBinary(t)
	browser := newBrowser(t)
	slots, seeds := memberSlots(t, 4)
	var nodes []*nodeProc
	for i := range 4 {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-test-chunk-delay", "4ms"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)
	_, manage, _ := net.SplitHostPort(nodes[0].slot.manage)
	p := &page{t: t, ctx: browser}
	nav, cancel := context.WithTimeout(browser, 20*time.Second)
	err := chromedp.Do(nav, chromedp.Navigate("http://127.0.0.1:"+manage+"/live/"), chromedp.WaitVisible("#members"))
	cancel()
	if err != nil {
		t.Fatalf("open the live view: %v", err)
	}
	p.wait("four members up", func(d liveDOM) bool {
		up := 0
		for _, m := range d.Members {
			if m.Health == "up" {
				up++
			}
		}
		return d.Conn == "open" && up == 4
	})

	// ---- broadcast: node 0 creates (it hosts the object's shard and the
	// page); the others Get; a receiver relaying to another is killed.
	data := randomBytes(11, 16<<20)
	id := idOwnedBy(t, view, nodes[0].id, "live-bcast")
	putRetry(t, c.of(nodes[0]), id, data)
	type result struct {
		n   *nodeProc
		err error
	}
	results := make(chan result, 3)
	for _, n := range nodes[1:] {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := c.of(n).Get(ctx, id)
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("%s got other bytes", n.id)
			}
			results <- result{n, err}
		}()
	}
	victim := waitRelay(t, c, nodes, id)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	for pending := 2; pending > 0; {
		r := <-results
		if r.n == victim {
			continue
		}
		if r.err != nil {
			t.Fatalf("broadcast with a member killed: %s: %v", r.n.id, r.err)
		}
		pending--
	}
	survivors := without(nodes, victim)
	// What the directory recorded of the broadcast: its streams.
	ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
	info, err := c.of(nodes[0]).Info(ictx, id, false)
	icancel()
	if err != nil {
		t.Fatal(err)
	}
	type edge struct{ from, to string }
	var streams []edge
	for _, tr := range info.GetTransfers() {
		if tr.GetReceiver() != victim.id { // the victim's own news died with it
			streams = append(streams, edge{tr.GetSender(), tr.GetReceiver()})
		}
	}
	if len(streams) < 2 {
		t.Fatalf("the directory recorded %d streams to the survivors: %v", len(streams), info.GetTransfers())
	}
	d := p.wait("the broadcast's streams, the failover and the victim failed", func(d liveDOM) bool {
		shown := map[edge]bool{}
		failover := false
		for _, e := range d.Edges {
			if e.Object == id {
				shown[edge{e.From, e.To}] = true
				failover = failover || e.Failover && e.From != victim.id && e.To != victim.id
			}
		}
		for _, s := range streams {
			if !shown[s] {
				return false
			}
		}
		switched := slices.ContainsFunc(d.Switches, func(s struct{ Object, Receiver, From, To string }) bool {
			return s.Object == id && s.From == victim.id && s.To != victim.id
		})
		return failover && switched && health(d, victim.id) == "failed"
	})
	for _, e := range d.Edges {
		if e.Object == id && (e.From == e.To || e.From == "" || e.To == "") {
			t.Fatalf("an edge with wrong endpoints: %+v", e)
		}
	}

	// ---- Reduce 4 of 6 on the caller (node 0); three sources exist, one
	// on victim2, placed in the tree before victim2 dies; then the rest.
	a, victim2 := survivors[1], survivors[2]
	target := idOwnedBy(t, view, nodes[0].id, "live-sum")
	const elems = 256 << 10
	put := func(n *nodeProc, k int) {
		putRetry(t, c.of(n), fmt.Sprintf("lsrc-%d", k), randomBytes(uint64(200+k), 4*elems))
	}
	var sources []string
	for k := range 6 {
		sources = append(sources, fmt.Sprintf("lsrc-%d", k))
	}
	put(a, 0)
	put(victim2, 1)
	put(nodes[0], 2)
	type reduced struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan reduced, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		r, err := c.of(nodes[0]).Reduce(ctx, target, sources, 4, messages.ReduceOp_SUM, messages.DType_INT32)
		done <- reduced{r, err}
	}()
	isTarget := func(reduce string) bool { return strings.HasPrefix(reduce, target+"#") }
	p.wait("the reduce tree with lsrc-1 placed on its member", func(d liveDOM) bool {
		return slices.ContainsFunc(d.Positions, func(x struct {
			Reduce, Object, Node, State string
			Position                    int
			Repaired                    bool
		}) bool {
			return isTarget(x.Reduce) && x.Object == "lsrc-1" && x.Node == victim2.id
		})
	})
	if err := victim2.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim2.exited
	put(nodes[0], 3)
	put(a, 4)
	put(a, 5)
	r := <-done
	if r.err != nil {
		t.Fatalf("reduce with a member killed: %v", r.err)
	}
	plan := r.r.GetPlan().GetPositions()
	d = p.wait("the reduce tree as answered, its repair, and victim2 failed", func(d liveDOM) bool {
		got := map[int]string{}
		for _, x := range d.Positions {
			if isTarget(x.Reduce) && x.State == "done" {
				got[x.Position] = x.Object + "@" + x.Node
			}
		}
		if len(got) != len(plan) {
			return false
		}
		for _, x := range plan {
			if got[int(x.GetPosition())] != x.GetObjectId()+"@"+x.GetNodeId() {
				return false
			}
		}
		repaired := slices.ContainsFunc(d.Repairs, func(x struct {
			Reduce, Failed, Replacement string
			Position                    int
		}) bool {
			return isTarget(x.Reduce) && x.Failed == "lsrc-1"
		})
		return repaired && health(d, victim2.id) == "failed" && health(d, victim.id) == "failed"
	})
	marked := 0
	for _, x := range d.Positions {
		if isTarget(x.Reduce) && x.Repaired {
			marked++
		}
	}
	if marked == 0 {
		t.Fatal("no reduce position is marked repaired")
	}
	p.screenshot("live-view.png")
}

// health is the page's word for member id's health.
func health(d liveDOM, id string) string {
	for _, m := range d.Members {
		if m.ID == id {
			return m.Health
		}
	}
	return ""
}
