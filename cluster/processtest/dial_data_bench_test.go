package processtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// BenchmarkDialPutGet64MiB times, side by side on two `hoplite node`
// processes, a Dial client's Put, Get and GetInto of a 64 MiB object
// against the member-to-member transfer of the same object: a
// prefetching Get on the other member, which fetches the object from the
// creator on the data plane and answers without the bytes. Each
// iteration Puts a new object through the client's member (the creator),
// has the other member fetch it, and Gets it through the client; then
// Puts the same bytes under another id from a reader of unknown length
// (PutFrom -1, in segments) and Gets that into an io.Writer (GetTo), and
// does both with the CLI (`hoplite put` from a pipe, `hoplite get` to
// one: a process's start and its Dial included). It reports each
// operation's median over the iterations and the ratios of the medians
// to the transfer's (put/m2m, get/m2m, getinto/m2m, stream/m2m,
// getto/m2m, cliput/m2m, cliget/m2m): a shared machine's pauses land on
// single operations, which a total would carry.
func BenchmarkDialPutGet64MiB(b *testing.B) {
	bin := hopliteBinary(b)
	slots, seeds := memberSlots(b, 2)
	var nodes []*nodeProc
	for i := range 2 {
		nodes = append(nodes, startNode(b, bin, slots[i], seeds, "-capacity", "1GiB", "-chunk-size", "auto"))
	}
	for _, n := range nodes {
		n.waitStarted(b, 60*time.Second)
	}
	tc := newTestClient(b)
	tc.converge(b, nodes...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, err := cluster.Dial(ctx, nodes[0].address)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const size = 64 << 20
	data := randomBytes(64, size)
	dst := make([]byte, size)
	other := nodes[1].store()
	// One round first: connections, the members' bandwidth estimates.
	warm := func(id string) {
		if err := c.Put(ctx, id, data); err != nil {
			b.Fatal(err)
		}
		if _, err := c.GetInto(ctx, id, dst); err != nil {
			b.Fatal(err)
		}
		prefetch(b, tc, other, id)
		if err := c.Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	warm("bench-warm")
	var put, m2m, get, into, stream, getto, cliPut, cliGet []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := fmt.Sprintf("bench-%d", i)
		t0 := time.Now()
		if err := c.Put(ctx, id, data); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		prefetch(b, tc, other, id)
		t2 := time.Now()
		got, err := c.Get(ctx, id)
		if err != nil || len(got) != size {
			b.Fatalf("get: %d bytes, %v", len(got), err)
		}
		t3 := time.Now()
		if n, err := c.GetInto(ctx, id, dst); err != nil || n != size {
			b.Fatalf("getinto: %d bytes, %v", n, err)
		}
		t4 := time.Now()
		if err := c.PutFrom(ctx, id+"-stream", &onlyReader{bytes.NewReader(data)}, -1); err != nil {
			b.Fatalf("put from a reader of unknown length: %v", err)
		}
		t5 := time.Now()
		if n, err := c.GetTo(ctx, id+"-stream", io.Discard); err != nil || n != size {
			b.Fatalf("getto: %d bytes, %v", n, err)
		}
		t6 := time.Now()
		cli := exec.CommandContext(ctx, bin, "put", "--addr="+nodes[0].address, id+"-cli")
		cli.Stdin = &onlyReader{bytes.NewReader(data)}
		if out, err := cli.CombinedOutput(); err != nil {
			b.Fatalf("hoplite put: %v %s", err, out)
		}
		t7 := time.Now()
		cli = exec.CommandContext(ctx, bin, "get", "--addr="+nodes[0].address, id+"-cli")
		var cliOut countingDiscard
		cli.Stdout = &cliOut
		if err := cli.Run(); err != nil || cliOut.n != size {
			b.Fatalf("hoplite get: %d bytes, %v", cliOut.n, err)
		}
		t8 := time.Now()
		put, m2m = append(put, t1.Sub(t0)), append(m2m, t2.Sub(t1))
		get, into = append(get, t3.Sub(t2)), append(into, t4.Sub(t3))
		stream, getto = append(stream, t5.Sub(t4)), append(getto, t6.Sub(t5))
		cliPut, cliGet = append(cliPut, t7.Sub(t6)), append(cliGet, t8.Sub(t7))
		b.StopTimer()
		for _, del := range []string{id, id + "-stream", id + "-cli"} {
			if err := c.Delete(ctx, del); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	mPut, mM2M, mGet, mInto := median(put), median(m2m), median(get), median(into)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(mPut), "put-ms")
	b.ReportMetric(ms(mM2M), "m2m-ms")
	b.ReportMetric(ms(mGet), "get-ms")
	b.ReportMetric(ms(mInto), "getinto-ms")
	b.ReportMetric(mPut.Seconds()/mM2M.Seconds(), "put/m2m")
	b.ReportMetric(mGet.Seconds()/mM2M.Seconds(), "get/m2m")
	b.ReportMetric(mInto.Seconds()/mM2M.Seconds(), "getinto/m2m")
	for _, r := range []struct {
		name string
		ds   []time.Duration
	}{{"stream", stream}, {"getto", getto}, {"cliput", cliPut}, {"cliget", cliGet}} {
		m := median(r.ds)
		b.ReportMetric(ms(m), r.name+"-ms")
		b.ReportMetric(m.Seconds()/mM2M.Seconds(), r.name+"/m2m")
	}
}

// onlyReader hides every method of its reader but Read: a pipe's
// bytes, of a length nobody knows before their end.
type onlyReader struct{ r io.Reader }

func (o *onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// countingDiscard counts and drops what is written to it.
type countingDiscard struct{ n int64 }

func (c *countingDiscard) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// prefetch has the store node pid bring a copy of id into its store
// (the member-to-member transfer) and waits for its answer.
func prefetch(b *testing.B, tc *testClient, pid *actor.PID, id string) {
	b.Helper()
	res, err := tc.system.Root.RequestFuture(pid, &messages.Get{ObjectId: id, Prefetch: true, TimeoutMs: 60_000}, time.Minute).Result()
	if err != nil {
		b.Fatalf("prefetch %s: %v", id, err)
	}
	if r, ok := res.(*messages.GetReply); !ok || r.GetError() != nil {
		b.Fatalf("prefetch %s: %v", id, res)
	}
}
