package member

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// exchangeServer serves the seed exchange of a member over p on a real
// HTTP server and counts the posts it answers and their bytes.
func exchangeServer(t *testing.T, p *seedProvider) (addr string, posts, bytes *atomic.Int64) {
	t.Helper()
	_, e := seedEndpoint(t, p)
	posts, bytes = new(atomic.Int64), new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, r)
		bytes.Add(int64(rec.Body.Len()))
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), posts, bytes
}

// Members whose seed lists agree exchange digests only: one post, an
// answer of Same without a list, nothing learned. Members whose lists
// differ end with the union on both sides: the answer carries the
// peer's list, and the poster posts its own as the peer lacks some of
// it.
func TestSeedExchangeByDigest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := &http.Client{}
	shared := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}

	reversed := slices.Clone(shared)
	slices.Reverse(reversed)
	a, b := fuzzProvider(t, shared...), fuzzProvider(t, reversed...)
	addr, posts, answered := exchangeServer(t, b)
	ma, _ := seedEndpoint(t, a)
	learned, err := ma.exchangeWith(ctx, a, client, "http", addr)
	if err != nil || learned {
		t.Fatalf("same lists: learned %v, %v", learned, err)
	}
	if posts.Load() != 1 {
		t.Fatalf("same lists: %d posts, want the digest's alone", posts.Load())
	}
	if answered.Load() > 40 {
		t.Fatalf("same lists: the answer took %d bytes, want a few (no list)", answered.Load())
	}

	a, b = fuzzProvider(t, "127.0.0.1:1", "127.0.0.1:2"), fuzzProvider(t, "127.0.0.1:2", "127.0.0.1:3")
	addr, posts, _ = exchangeServer(t, b)
	ma, _ = seedEndpoint(t, a)
	learned, err = ma.exchangeWith(ctx, a, client, "http", addr)
	if err != nil || !learned {
		t.Fatalf("different lists: learned %v, %v", learned, err)
	}
	if posts.Load() != 2 {
		t.Fatalf("different lists: %d posts, want the digest and then the list", posts.Load())
	}
	for _, p := range []*seedProvider{a, b} {
		if hosts := p.Hosts(); !slices.Contains(hosts, "127.0.0.1:1") || !slices.Contains(hosts, "127.0.0.1:3") {
			t.Errorf("after the exchange one side polls %v, want the union", hosts)
		}
	}
}

// A list posted without a digest (an older member's exchange) is learned
// and answered with the list, never Same.
func TestSeedExchangeAnswersAListWithAList(t *testing.T) {
	p := fuzzProvider(t, "127.0.0.1:1")
	_, e := seedEndpoint(t, p)
	body, _ := json.Marshal(seedExchange{Cluster: seedTestCluster, Seeds: []string{"127.0.0.1:1"}})
	rec := postExchange(e, body)
	var out seedExchange
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	if out.Same || !slices.Equal(out.Seeds, []string{"127.0.0.1:1"}) {
		t.Fatalf("answered %+v, want the list", out)
	}
	// The same list's digest is answered Same, and another digest with
	// the list.
	for _, c := range []struct {
		digest string
		same   bool
	}{{seedDigest([]string{"127.0.0.1:1"}), true}, {seedDigest([]string{"127.0.0.1:9"}), false}} {
		body, _ := json.Marshal(seedExchange{Cluster: seedTestCluster, Digest: c.digest})
		rec := postExchange(e, body)
		var out seedExchange
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		if out.Same != c.same || (len(out.Seeds) == 0) != c.same {
			t.Errorf("digest %s: answered %+v, want same %v", c.digest, out, c.same)
		}
	}
}

// The digest does not depend on the list's order or repeats.
func TestSeedDigestIgnoresOrder(t *testing.T) {
	if seedDigest([]string{"a:1", "b:2", "b:2"}) != seedDigest([]string{"b:2", "a:1"}) {
		t.Fatal("the same seeds in another order have another digest")
	}
	if seedDigest([]string{"a:1"}) == seedDigest([]string{"a:1", "b:2"}) {
		t.Fatal("different seeds have one digest")
	}
}
