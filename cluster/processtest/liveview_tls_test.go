package processtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestLiveViewOverTLS: with --tls-* the live view is served over HTTPS
// under the manage port's client-certificate rule: a client with the
// cluster's certificate gets the page and reads the feed (both members,
// gathered over the members' TLS data plane); one without a certificate,
// with another CA's, or over plain HTTP gets nothing.
func TestLiveViewOverTLS(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	ca, cert, key, fca, fcert, fkey := clusterAndForeignCerts(t)
	slots, seeds := memberSlots(t, 2)
	var nodes []*nodeProc
	for i := range 2 {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-tls-cert", cert, "-tls-key", key, "-tls-ca", ca))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	ccfg, fcfg := clientTLS(t, cert, key, ca), clientTLS(t, fcert, fkey, fca)
	noCert := ccfg.Clone()
	noCert.Certificates = nil
	// Trusts the members, presents another CA's certificate: the members
	// refuse it, not the client them.
	foreign := ccfg.Clone()
	foreign.Certificates = fcfg.Certificates
	base := "://" + nodes[0].slot.manage + "/live/"
	get := func(ctx context.Context, scheme, path string, cfg *tls.Config) (*http.Response, error) {
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+base+path, nil)
		if err != nil {
			return nil, err
		}
		return cl.Do(req)
	}

	// Refused: no certificate, a foreign one, plain HTTP.
	for _, tc := range []struct {
		name, scheme string
		cfg          *tls.Config
	}{{"without a client certificate", "https", noCert}, {"with another CA's certificate", "https", foreign}, {"over plain HTTP", "http", nil}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := get(ctx, tc.scheme, "feed", tc.cfg)
		t.Logf("a client %s: %v", tc.name, err)
		if err == nil {
			b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
			res.Body.Close()
			if res.StatusCode == http.StatusOK || strings.Contains(string(b), nodes[0].id) {
				cancel()
				t.Fatalf("the live view answered a client %s: %s %q", tc.name, res.Status, b)
			}
		}
		cancel()
	}

	// Served: the page, and the feed with both members up.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := get(ctx, "https", "", ccfg)
	if err != nil {
		t.Fatalf("the page with the cluster's certificate: %v", err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "Hoplite live view") {
		t.Fatalf("the page: %s %q", res.Status, page)
	}
	if res, err = get(ctx, "https", "feed", ccfg); err != nil {
		t.Fatalf("the feed with the cluster's certificate: %v", err)
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			event = name
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || event != "state" {
			continue
		}
		var f struct {
			Members []struct{ Member, Health string }
		}
		if err := json.Unmarshal([]byte(data), &f); err != nil {
			t.Fatalf("a state frame: %v: %s", err, data)
		}
		up := 0
		for _, m := range f.Members {
			if m.Health == "up" && slices.ContainsFunc(nodes, func(n *nodeProc) bool { return n.id == m.Member }) {
				up++
			}
		}
		if up == 2 {
			return
		}
	}
	t.Fatalf("the feed ended (%v) before a state frame showed both members up", sc.Err())
}
