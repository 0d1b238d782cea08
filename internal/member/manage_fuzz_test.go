package member

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/labstack/echo"
	"github.com/sirupsen/logrus"
)

// fuzzMaxLearned is the learned seeds' cap in the fuzz targets: small, so
// that inputs reach it.
const fuzzMaxLearned = 8

// fuzzProvider is a provider that polls nothing by itself (its server is
// never started), logging nowhere.
func fuzzProvider(t testing.TB, seeds ...string) *seedProvider {
	log := logrus.New()
	log.SetOutput(io.Discard)
	p := newSeedProvider(echo.New(), seedProviderConfig{Cluster: seedTestCluster, Seeds: seeds, Refresh: time.Second,
		Timeout: time.Second, Misses: 1, MaxLearned: fuzzMaxLearned, Metrics: newManageMetrics(), Log: logrus.NewEntry(log)})
	t.Cleanup(func() { _ = p.Shutdown(false) })
	return p
}

// checkLearned: every learned seed is valid, and there are at most the cap.
func checkLearned(t *testing.T, p *seedProvider, configured int) {
	t.Helper()
	hosts := p.Hosts()
	if len(hosts) > configured+fuzzMaxLearned {
		t.Fatalf("%d hosts polled: more than %d configured + %d learned", len(hosts), configured, fuzzMaxLearned)
	}
	for _, h := range hosts[configured:] {
		if err := validSeed(h); err != nil {
			t.Fatalf("learned an invalid seed %q: %v", h, err)
		}
	}
}

// FuzzSeedExchange posts any body to the seed exchange endpoint (the real
// handler, as the manage port serves it): never a panic nor a 5xx; a
// body that is not a seed exchange is a 400, another cluster's a 409;
// what it learns is valid and bounded.
func FuzzSeedExchange(f *testing.F) {
	f.Add([]byte(`{"cluster":"seedtest","seeds":["127.0.0.1:7946","[::1]:80"]}`))
	f.Add([]byte(`{"cluster":"seedtest","seeds":["a b:1","127.0.0.1:0","",":80","x:99999"]}`))
	f.Add([]byte(`{"cluster":"other","seeds":["127.0.0.1:1"]}`))
	f.Add([]byte(`{"cluster":"seedtest","seeds":null}`))
	f.Add([]byte(`{"cluster":"seedtest","seeds":[1,2,3]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"cluster":"seedtest","seeds":["a:1","b:2","c:3","d:4","e:5","f:6","g:7","h:8","i:9","j:10"]}`))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, body []byte) {
		p := fuzzProvider(t, "127.0.0.1:1")
		_, e := seedEndpoint(t, p)
		rec := postExchange(e, body)
		var in seedExchange
		decodes := json.NewDecoder(bytes.NewReader(body)).Decode(&in) == nil
		switch {
		case rec.Code >= 500:
			t.Fatalf("status %d for %q", rec.Code, body)
		case !decodes && rec.Code != http.StatusBadRequest:
			t.Fatalf("status %d for a body that is not a seed exchange, want 400", rec.Code)
		case decodes && in.Cluster != seedTestCluster && rec.Code != http.StatusConflict:
			t.Fatalf("status %d for cluster %q, want 409", rec.Code, in.Cluster)
		case decodes && in.Cluster == seedTestCluster && rec.Code != http.StatusOK:
			t.Fatalf("status %d for a seed exchange of this cluster, want 200", rec.Code)
		}
		checkLearned(t, p, 1)
	})
}

// replyTransport answers every request with status and body.
type replyTransport struct {
	status int
	body   []byte
}

func (r replyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: r.status, Status: http.StatusText(r.status), Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(r.body)), ContentLength: int64(len(r.body)), Request: req}, nil
}

// FuzzHealthAnswer hands any /_health answer (status and body) of a peer
// to a health round: never a panic; a member it puts in the topology
// names itself and a port.
func FuzzHealthAnswer(f *testing.F) {
	f.Add(200, []byte(`{"id":"m1","address":"127.0.0.1","port":7000,"auto_manage_port":7001,"kinds":["k"],"cluster_name":"seedtest"}`))
	f.Add(200, []byte(`{"id":"m1","address":"127.0.0.1","port":4294967297,"cluster_name":"seedtest"}`))
	f.Add(200, []byte(`{"id":"m1","address":"127.0.0.1","port":-1,"cluster_name":"seedtest"}`))
	f.Add(200, []byte(`{"id":"","cluster_name":"seedtest"}`))
	f.Add(200, []byte(`{"id":"m1","port":1,"cluster_name":"other"}`))
	f.Add(200, []byte(`{"id":"m1","port":1,"kinds":null}`))
	f.Add(200, []byte(`null`))
	f.Add(503, []byte(`starting`))
	f.Add(200, []byte(`{"id":`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			return // not an HTTP status: the client would not hand it over
		}
		p := fuzzProvider(t, "peer.example:7946")
		p.client = &http.Client{Transport: replyTransport{status: status, body: body}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		members, _ := p.round(ctx)
		for _, m := range members {
			if m.Id == "" || m.Port <= 0 || m.Port > 65535 {
				t.Fatalf("topology member %+v from %d %q", m, status, body)
			}
		}
	})
}

// FuzzSeedsReply hands any answer (status and body) of a peer to this
// member's seed exchange: never a panic; what it learns is valid and
// bounded.
func FuzzSeedsReply(f *testing.F) {
	f.Add(200, []byte(`{"cluster":"seedtest","seeds":["127.0.0.1:7946"]}`))
	f.Add(200, []byte(`{"cluster":"seedtest","seeds":["junk","1.2.3.4:5","[::1]:0"]}`))
	f.Add(200, []byte(`{"seeds":["a:1","b:2","c:3","d:4","e:5","f:6","g:7","h:8","i:9","j:10"]}`))
	f.Add(409, []byte(`cluster seedtest, not x`))
	f.Add(200, []byte(`{"seeds":"x"}`))
	f.Add(200, []byte(``))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		p := fuzzProvider(t, "127.0.0.1:1")
		m, _ := seedEndpoint(t, p)
		client := &http.Client{Transport: replyTransport{status: status, body: body}}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ans, err := postSeeds(ctx, client, "http", "127.0.0.1:1", seedExchange{Cluster: seedTestCluster, Seeds: p.Gossip()})
		if err == nil {
			m.learnSeeds(p, ans.Seeds, "from a fuzzed peer")
		} else if status == http.StatusOK && json.Valid(body) && bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
			var in seedExchange
			if json.Unmarshal(body, &in) == nil {
				t.Fatalf("a valid answer was refused: %v", err)
			}
		}
		checkLearned(t, p, 1)
	})
}
