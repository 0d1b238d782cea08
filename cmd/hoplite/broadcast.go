package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// broadcastRun is one broadcast measured end to end: Put on node 0, then
// concurrent Gets on every other node.
type broadcastRun struct {
	Elapsed time.Duration
	Info    *messages.ObjectInfo
}

// runBroadcast times a broadcast of data on l, verifying every receiver's
// bytes. progress, if not nil, is called periodically with each node's
// received fraction.
func runBroadcast(ctx context.Context, l *cluster.Local, id string, data []byte, progress func([]float64)) (broadcastRun, error) {
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		return broadcastRun{}, fmt.Errorf("put: %w", err)
	}
	stop := make(chan struct{})
	var pw sync.WaitGroup
	if progress != nil {
		pw.Add(1)
		go func() {
			defer pw.Done()
			t := time.NewTicker(200 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					progress(fractions(l, id, len(data)))
				}
			}
		}()
	}
	begin := time.Now()
	errs := make(chan error, l.Nodes())
	var wg sync.WaitGroup
	for i := 1; i < l.Nodes(); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := l.Client(i).GetReadOnly(ctx, id)
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("node-%d received different bytes", i)
			}
			errs <- err
		}()
	}
	wg.Wait()
	elapsed := time.Since(begin)
	close(stop)
	pw.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return broadcastRun{}, err
		}
	}
	info, err := l.Client(0).Info(ctx, id, false)
	if err != nil {
		return broadcastRun{}, err
	}
	return broadcastRun{Elapsed: elapsed, Info: info}, nil
}

func fractions(l *cluster.Local, id string, size int) []float64 {
	f := make([]float64, l.Nodes())
	for i := range f {
		f[i] = float64(l.Written(i, id)) / float64(max(size, 1))
	}
	return f
}

// progressLine draws one bar per node: " 0:██████████  1:███▌ ..."
func progressLine(f []float64) string {
	var b strings.Builder
	for i, x := range f {
		n := int(x*10 + 0.5)
		fmt.Fprintf(&b, "%d:%s%s ", i, strings.Repeat("#", n), strings.Repeat(".", 10-n))
	}
	return b.String()
}

// printTree prints who fetched from whom as a tree rooted at the creator.
func printTree(w io.Writer, info *messages.ObjectInfo, root string) {
	children := map[string][]string{}
	for _, tr := range info.GetTransfers() {
		if !tr.GetAborted() {
			children[tr.GetSender()] = append(children[tr.GetSender()], tr.GetReceiver())
		}
	}
	var walk func(node, prefix string, last bool, top bool)
	walk = func(node, prefix string, last, top bool) {
		switch {
		case top:
			fmt.Fprintf(w, "  %s (creator)\n", node)
		case last:
			fmt.Fprintf(w, "  %s└─ %s\n", prefix, node)
			prefix += "   "
		default:
			fmt.Fprintf(w, "  %s├─ %s\n", prefix, node)
			prefix += "│  "
		}
		kids := children[node]
		slices.Sort(kids)
		for i, k := range kids {
			walk(k, prefix, i == len(kids)-1, false)
		}
	}
	walk(root, "", true, true)
}

// randomData returns incompressible bytes (compression must not flatter
// anyone's numbers).
func randomData(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func mbps(bytes int, d time.Duration) float64 {
	return float64(bytes) / d.Seconds() / 1e6
}
