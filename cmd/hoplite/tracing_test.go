package main

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// collector is an OTLP/gRPC trace receiver: it records the span names it
// is sent, by service.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names map[string][]string // service.name -> span names
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names[service] = append(c.names[service], s.GetName())
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func (c *collector) spans(service string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.names[service])
}

// hoplite node --trace-otlp sends its spans to an OTLP collector: a Get
// from the CLI on one member of an object another holds shows as the
// receiving member's fetch, the shard's Locate and the transfer.
func TestNodeExportsSpansOverOTLP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{names: map[string][]string{}}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, col)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	bin := builtHoplite(t)
	addrs := startMembers(t, bin, 2, "-trace-otlp", ln.Addr().String(), "-trace-otlp-insecure")
	// The members greet each other after their start lines: until both
	// list both, the Get's member may route it by a view without the
	// Put's.
	for _, a := range addrs {
		end := time.Now().Add(30 * time.Second)
		for {
			code, out, _ := cli(t, bin, nil, "members", "--addr", a)
			if code == 0 && strings.Count(out, "\n") == 2 {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("members at %s: %s", a, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	data := bytes.Repeat([]byte("traced bytes "), 100_000) // streamed, not inline
	if code, _, errs := cli(t, bin, data, "put", "--addr", addrs[0], "traced"); code != 0 {
		t.Fatalf("put: %s", errs)
	}
	code, out, errs := cli(t, bin, nil, "get", "--addr", addrs[1], "--wait", "20s", "traced")
	if code != 0 || out != string(data) {
		t.Fatalf("get: exit %d, %d bytes, %s", code, len(out), errs)
	}
	end := time.Now().Add(30 * time.Second) // the batcher exports every 5 s
	for {
		names := col.spans("hoplite")
		if slices.Contains(names, "hoplite.fetch") && slices.Contains(names, "hoplite.transfer") && slices.Contains(names, "hoplite.Locate") {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the collector got %q from service hoplite, want the Get's fetch, Locate and transfer", names)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
