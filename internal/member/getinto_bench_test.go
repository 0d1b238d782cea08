package member

import (
	"bytes"
	"context"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// BenchmarkGetIntoVsTCP64MiB times, in every iteration, a GetInto of
// 64 MiB between two members on the TCP data plane (in one process) and
// a plain TCP copy of the same bytes from a socket, both into one reused,
// pre-faulted buffer (alternating which goes first), and reports the
// median ratio of their times: the like-for-like measure of the data
// plane (`hoplite bench p2p-tcp` measures it across processes).
func BenchmarkGetIntoVsTCP64MiB(b *testing.B) {
	const size = 64 << 20
	sender, receiver := joinPair(b, testLogger(b, logrus.WarnLevel), func(c *MemberConfig) { c.ChunkSize, c.Capacity = 4<<20, 2*size })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	data := randomBytes(9, size)
	if err := sender.Client().Put(ctx, "bench-into", data); err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = c.Write(data)
			}()
		}
	}()
	buf := bytes.Repeat([]byte{1}, size) // faulted in before timing
	into := func() time.Duration {
		t := time.Now()
		n, err := receiver.Client().GetInto(ctx, "bench-into", buf)
		d := time.Since(t)
		if err != nil || n != size || !bytes.Equal(buf, data) {
			b.Fatalf("GetInto: %d bytes, %v", n, err)
		}
		clear(buf)
		return d
	}
	plain := func() time.Duration {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		t := time.Now()
		_, err = io.ReadFull(c, buf)
		d := time.Since(t)
		if err != nil || !bytes.Equal(buf, data) {
			b.Fatalf("plain copy: %v", err)
		}
		clear(buf)
		return d
	}
	into() // warm-up: connections, the bandwidth estimate
	plain()
	var ti, tp time.Duration
	ratios := make([]float64, 0, b.N)
	b.SetBytes(size)
	b.ResetTimer()
	for i := range b.N {
		var a, p time.Duration
		if i%2 == 0 {
			a, p = into(), plain()
		} else {
			p, a = plain(), into()
		}
		ti, tp = ti+a, tp+p
		ratios = append(ratios, p.Seconds()/a.Seconds())
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "median-tcp/getinto")
	b.ReportMetric(float64(size)*float64(b.N)/ti.Seconds()/1e6, "getinto-MB/s")
	b.ReportMetric(float64(size)*float64(b.N)/tp.Seconds()/1e6, "tcp-MB/s")
}
