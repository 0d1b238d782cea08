package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// The put/get progress: a bar with the share of bytes counted, the
// elapsed time while waiting for the cluster, a cleared line at the end,
// and nothing at all off a terminal or for small objects.
func TestTransferProgress(t *testing.T) {
	var out bytes.Buffer
	p := newTransferProgress(&out, true, "put weights", 4<<20)
	p.counting("reading", 4<<20)
	if _, err := io.Copy(io.Discard, progressReader{r: bytes.NewReader(make([]byte, 1<<20)), p: p}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "put weights: reading [######..................]  25% 1.0 MiB/4.0 MiB") {
		t.Fatalf("after 1 of 4 MiB: %q", s)
	}
	p.waiting("storing 4.0 MiB")
	time.Sleep(450 * time.Millisecond) // the ticker redraws the elapsed time (every 200 ms)
	p.end()
	s := out.String()
	if draws := strings.Count(s, "reading ["); draws > 27 {
		t.Fatalf("1 MiB read in small pieces drew the bar %d times (once per percent: at most 26)", draws)
	}
	if !strings.Contains(s, "put weights: storing 4.0 MiB 0.0s") || strings.Count(s, "storing 4.0 MiB 0.") < 2 {
		t.Fatalf("waiting phase: %q", s)
	}
	if !strings.HasSuffix(s, "\r") || strings.HasSuffix(strings.TrimRight(s, " \r"), "\n") {
		t.Fatalf("the line is not cleared at the end: %q", s[max(0, len(s)-80):])
	}
	n := out.Len()
	p.end() // twice: harmless
	if out.Len() != n {
		t.Fatalf("a second end wrote %q", out.String()[n:])
	}

	var w bytes.Buffer
	q := newTransferProgress(&w, true, "get x", 0)
	q.counting("writing", 3<<20)
	var sink bytes.Buffer
	if _, err := io.Copy(progressWriter{w: &sink, p: q}, bytes.NewReader(make([]byte, 3<<20))); err != nil || sink.Len() != 3<<20 {
		t.Fatalf("progressWriter: %v, %d bytes", err, sink.Len())
	}
	if !strings.Contains(w.String(), "100% 3.0 MiB/3.0 MiB") {
		t.Fatalf("writing phase: %q", w.String())
	}

	for _, c := range []struct {
		tty  bool
		size int64
	}{{false, 64 << 20}, {true, 1000}} {
		var quiet bytes.Buffer
		q := newTransferProgress(&quiet, c.tty, "put y", c.size)
		q.counting("reading", c.size)
		q.add(int(c.size))
		q.waiting("storing")
		q.end()
		if quiet.Len() != 0 {
			t.Fatalf("tty %v, size %d: drew %q", c.tty, c.size, quiet.String())
		}
	}
}
