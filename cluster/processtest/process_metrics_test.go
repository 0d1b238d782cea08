package processtest

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// scrape reads a member's /metrics and returns the samples whose name
// (with labels) starts with prefix, summed.
func scrape(t *testing.T, p *nodeProc, path string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + p.slot.manage + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// sample sums the values of the samples of metric (any labels matching
// the label filter substring).
func sample(body, metric, labels string) float64 {
	var sum float64
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, metric) {
			continue
		}
		name, val, ok := strings.Cut(line, " ")
		if !ok || (name != metric && !strings.HasPrefix(name, metric+"{")) || !strings.Contains(name, labels) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// TestProcessMetrics: /metrics on `hoplite node` members moves with the
// objects: a 4 MiB object Put on one member and fetched by another shows
// as bytes sent by the first, received from it by the second, a transfer,
// pinned and cached store bytes, and a directory entry; /debug/pprof is
// there only with --pprof.
func TestProcessMetrics(t *testing.T) {
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	a := startNode(t, bin, slots[0], seeds, "-pprof")
	b := startNode(t, bin, slots[1], seeds)
	a.waitStarted(t, 60*time.Second)
	b.waitStarted(t, 60*time.Second)
	c := newTestClient(t)
	c.converge(t, a, b)

	_, before := scrape(t, b, "/metrics")
	if v := sample(before, "hoplite_data_received_bytes_total", a.id); v != 0 {
		t.Fatalf("received from %s before any transfer: %v", a.id, v)
	}
	data := randomBytes(3, 4<<20)
	putRetry(t, c.of(a), "metered", data)
	getExact(t, c.of(b), "metered", data)

	code, am := scrape(t, a, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	_, bm := scrape(t, b, "/metrics")
	n := float64(len(data))
	for _, check := range []struct {
		what  string
		body  string
		name  string
		label string
		min   float64
	}{
		{"sent by the creator", am, "hoplite_data_sent_bytes_total", "", n},
		{"received from the creator", bm, "hoplite_data_received_bytes_total", `peer="` + a.id + `"`, n},
		{"the receiver's transfers", bm, "hoplite_transfers_total", "", 1},
		{"the receiver's transfer durations", bm, "hoplite_transfer_duration_seconds_count", "", 1},
		{"the creator's pinned bytes", am, "hoplite_store_pinned_bytes", "", n},
		{"the receiver's cached bytes", bm, "hoplite_store_cached_bytes", "", n},
		{"the capacity", am, "hoplite_store_capacity_bytes", "", 256 << 20},
		{"directory entries on both", am + bm, "hoplite_directory_objects", "", 1},
		{"Go runtime metrics", am, "go_goroutines", "", 1},
	} {
		if v := sample(check.body, check.name, check.label); v < check.min {
			t.Errorf("%s: %s{%s} = %v, want >= %v", check.what, check.name, check.label, v, check.min)
		}
	}
	if code, body := scrape(t, a, "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/ with --pprof: %d", code)
	}
	if code, _ := scrape(t, b, "/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without --pprof: %d, want 404", code)
	}
}

// TestProcessLocatesOnTheDataPlane: between `hoplite node` processes, a
// Get whose object's shard is on the other member asks it on the data
// plane, and the answer comes back there, with the bytes for an inline
// object and naming a sender for one that streams (one route for both).
// With 16 objects of each kind, some shard of each kind is on the
// creator's member but for a chance of 2^-15.
func TestProcessLocatesOnTheDataPlane(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	a := startNode(t, bin, slots[0], seeds)
	b := startNode(t, bin, slots[1], seeds)
	a.waitStarted(t, 60*time.Second)
	b.waitStarted(t, 60*time.Second)
	c := newTestClient(t)
	c.converge(t, a, b)
	for i := range 16 {
		small := randomBytes(uint64(100+i), 1<<10)
		large := randomBytes(uint64(200+i), 256<<10)
		putRetry(t, c.of(a), "dp-small-"+strconv.Itoa(i), small)
		putRetry(t, c.of(a), "dp-large-"+strconv.Itoa(i), large)
		getExact(t, c.of(b), "dp-small-"+strconv.Itoa(i), small)
		getExact(t, c.of(b), "dp-large-"+strconv.Itoa(i), large)
	}
	_, am := scrape(t, a, "/metrics")
	if v := sample(am, "hoplite_data_plane_locates_total", `result="ok"`); v < 2 {
		t.Errorf("Locates answered on the data plane by the creator's member: %v, want >= 2 (an inline and a streamed object's)", v)
	}
}

// TestProcessReduceSpreadsBandwidth: among `hoplite node` processes that
// have measured no bandwidth, Reduces (chains: the leaf's parent reads a
// whole source, which measures the link) leave every member with a B:
// the measuring member its own, the coordinator's member from the
// position's report, the others from the coordinator's release, which
// also goes to a leaf's member, which runs no task (without it, a member
// whose source kept being a leaf never learned B: this test failed so
// in a CI run). The test allows three Reduces: fewer than the four it
// would take every member to measure the link alone.
func TestProcessReduceSpreadsBandwidth(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 4)
	var nodes []*nodeProc
	for i := range slots {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-experiments", "reduce-degree=1"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	bandwidth := func(n *nodeProc) float64 {
		_, body := scrape(t, n, "/metrics")
		return sample(body, "hoplite_bandwidth_bytes_per_second", "")
	}
	var ids []string
	for i, n := range nodes {
		if b := bandwidth(n); b != 0 {
			t.Fatalf("%s measured %v B/s before any transfer", n.slot.bind, b)
		}
		id := "bw-src-" + strconv.Itoa(i)
		putRetry(t, c.of(n), id, randomBytes(uint64(400+i), 1<<20))
		ids = append(ids, id)
	}
	var without []string
	for r := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := c.of(nodes[r%len(nodes)]).Reduce(ctx, "bw-sum-"+strconv.Itoa(r), ids, len(ids), messages.ReduceOp_SUM, messages.DType_INT32)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		// The releases follow the reply: allow them a moment.
		end := time.Now().Add(2 * time.Second)
		for {
			without = without[:0]
			for _, n := range nodes {
				if bandwidth(n) <= 0 {
					without = append(without, n.slot.bind)
				}
			}
			if len(without) == 0 {
				return
			}
			if time.Now().After(end) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Fatalf("after three Reduces %v have no bandwidth", without)
}
