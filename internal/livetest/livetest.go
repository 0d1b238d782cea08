// Package livetest drives the live view's page (package liveview) in
// headless Chromium for tests, and reads back what the page shows from
// its DOM: every element that stands for something in the cluster
// carries data-* attributes naming it.
package livetest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumInstall is how the project's own setup (.ci/run) installs the
// browser.
const ChromiumInstall = "apt-get update && apt-get install -y chromium"

// chromiumPath finds Debian's Chromium (HOPLITE_CHROMIUM names another).
func chromiumPath(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HOPLITE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("the live view's browser tests need Chromium, which is not installed: run the tests with `scripts/test` (as root it installs it), or `%s` (or set HOPLITE_CHROMIUM to a Chromium binary)", ChromiumInstall)
	return ""
}

// Browser starts headless Chromium for t: no sandbox (tests run as
// root), nothing that reaches for the network on its own (with none but
// the package registries, its start stalls on refused connections), a
// fresh profile. It ends with t.
func Browser(t testing.TB) context.Context {
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

// Page is the live view open in the browser.
type Page struct {
	t   testing.TB
	ctx context.Context
}

// Open navigates the browser to url (the view's page) and waits for the
// page to draw, and for it to record from then on every partial copy and
// every reduce position in progress it shows (Seen).
func Open(t testing.TB, browser context.Context, url string) *Page {
	t.Helper()
	nav, cancel := context.WithTimeout(browser, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(nav, chromedp.Navigate(url), chromedp.WaitVisible("#members")); err != nil {
		t.Fatalf("open the live view at %s: %v", url, err)
	}
	if _, err := chromedp.Run(nav, chromedp.Evaluate[bool](watchJS)); err != nil {
		t.Fatalf("watch the live view: %v", err)
	}
	return &Page{t: t, ctx: browser}
}

// watchJS records, at every change of the page, the partial copies and
// the reduce positions part way that it shows: they last a moment, too
// short to be sure a reader polling the page catches them.
const watchJS = `(() => {
  window.__seen = {partial: {}, progress: {}};
  const scan = () => {
    for (const e of document.querySelectorAll('#objects .copy[data-complete="0"]'))
      window.__seen.partial[e.closest('tr').dataset.object + '|' + e.dataset.member] = Number(e.dataset.progress);
    for (const e of document.querySelectorAll('#reduces g.pos')) {
      const p = e.dataset.progress;
      if (p !== '' && Number(p) > 0 && Number(p) < 100) window.__seen.progress[e.dataset.reduce + '|' + e.dataset.position] = Number(p);
    }
  };
  new MutationObserver(scan).observe(document.querySelector('main'), {childList: true, subtree: true});
  return true;
})()`

// Seen is what the page showed in passing since Open: partial copies
// (object|member -> percent) and reduce positions part way
// (reduce|position -> percent).
type Seen struct {
	Partial  map[string]int `json:"partial"`
	Progress map[string]int `json:"progress"`
}

// Seen reads what the page recorded since Open.
func (p *Page) Seen() (Seen, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[Seen](`window.__seen`))
}

// DOM reads what the page shows now.
func (p *Page) DOM() (DOM, error) {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[DOM](readDOM))
}

// Wait reads the page until cond holds, failing after 20 s with what
// the page showed last (and its screenshot, failed.png).
func (p *Page) Wait(what string, cond func(DOM) bool) DOM {
	p.t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		d, err := p.DOM()
		if err == nil && cond(d) {
			return d
		}
		if time.Now().After(end) {
			p.Screenshot("failed.png", "")
			b, _ := json.MarshalIndent(d, "", " ")
			p.t.Fatalf("the live view never showed %s (%v); it showed:\n%s", what, err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Screenshot saves the whole page as name in the test's artifact
// directory (go test -artifacts keeps it), and at also if it is set.
func (p *Page) Screenshot(name, also string) {
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Logf("screenshot: %v", err)
		return
	}
	paths := []string{filepath.Join(p.t.ArtifactDir(), name)}
	if also != "" {
		paths = append(paths, also)
	}
	for _, path := range paths {
		if err := os.WriteFile(path, png, 0o644); err != nil {
			p.t.Errorf("screenshot: %v", err)
			continue
		}
		p.t.Logf("screenshot: %s", path)
	}
}
