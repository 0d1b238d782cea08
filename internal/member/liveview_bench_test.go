package member

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkBroadcastLiveView: what a browser watching costs the data
// plane. One embedded cluster of 8 serving its live view (Config.UI); in
// every iteration a 32 MiB broadcast from node 0 to the 7 others with no
// client attached (the view idle: nothing gathers) and one with a client
// reading the feed (every member's news gathered every 250 ms, streamed),
// alternating which goes first. Reports each side's median and
// with/without, the ratio of the medians; on unlimited (memory-speed)
// links, where any overhead shows most, and on 1 Gbit/s links.
//
//	go test -run x -bench BroadcastLiveView -benchtime 20x ./internal/member/
func BenchmarkBroadcastLiveView(b *testing.B) {
	const size = 32 << 20
	for _, link := range []struct {
		name string
		bps  float64
	}{{"mem", 0}, {"1Gbit", benchGbit}} {
		b.Run(link.name, func(b *testing.B) {
			l := benchCluster(b, Config{Nodes: benchNodes, Capacity: benchCapacity, LinkBandwidth: link.bps, UI: "127.0.0.1:0"})
			data := randomBytes(5, size)
			b.StopTimer()
			benchBroadcast(b, l, "lv-warmup", data)
			var with, without []time.Duration
			b.SetBytes(int64(size) * (benchNodes - 1) * 2)
			b.ResetTimer()
			b.StopTimer()
			for i := range b.N {
				for k := range 2 {
					watched := (i+k)%2 == 1
					id := fmt.Sprintf("lv-%d-%d", i, k)
					if !watched {
						without = append(without, benchBroadcast(b, l, id, data))
						continue
					}
					stop := attachFeed(b, l)
					with = append(with, benchBroadcast(b, l, id, data))
					stop()
				}
			}
			mw, mo := medianDuration(with), medianDuration(without)
			b.ReportMetric(float64(mo.Microseconds())/1e3, "ms-without")
			b.ReportMetric(float64(mw.Microseconds())/1e3, "ms-with")
			b.ReportMetric(mw.Seconds()/mo.Seconds(), "with/without")
			if s := l.ui.hub.Stats(); s.Gathers == 0 || s.Published == 0 {
				b.Fatalf("the view gathered nothing while watched: %+v", s)
			}
		})
	}
}

// attachFeed opens the live view's feed and reads it until stop; it
// returns once the hub has gathered for it (the first state frame), and
// stop returns once the hub has let it go (the view is idle again).
func attachFeed(b *testing.B, l *Local) (stop func()) {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), benchTimeout)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.UIAddr()+"/live/feed", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		b.Fatal(err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "event: state") && ready != nil {
				close(ready)
				ready = nil
			}
		}
		_, _ = io.Copy(io.Discard, res.Body)
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		b.Fatal("the feed sent no state")
	}
	return func() {
		cancel()
		res.Body.Close()
		<-done
		end := time.Now().Add(10 * time.Second)
		for l.ui.hub.Stats().Clients != 0 {
			if time.Now().After(end) {
				b.Fatal("the hub kept the closed client")
			}
			time.Sleep(time.Millisecond)
		}
	}
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
