package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// transferProgress is what `hoplite put` and `get` show on a terminal
// while a large object moves: a bar while a put's input is read (its
// count known for a file), the bytes so far while a get streams, and
// the elapsed time while the cluster stores a put (the member reports
// no progress until it answers). Off a terminal it writes nothing, so
// scripts and pipes see only the command's output.
type transferProgress struct {
	w     io.Writer // nil: off
	label string

	mu     sync.Mutex
	width  int // of the last line drawn, to clear it
	start  time.Time
	phase  string
	done   int64
	total  int64     // 0: unknown
	drawn  time.Time // the last draw (unknown totals redraw every 100 ms)
	pct    int64     // the last percentage drawn (known totals redraw as it moves)
	stopCh chan struct{}
	wg     sync.WaitGroup
}

// progressMin is the smallest object a bar is drawn for: smaller ones
// move faster than a terminal redraws.
const progressMin = 1 << 20

// newTransferProgress draws on w if tty and size (0 if unknown) is large
// or unknown; otherwise it returns a progress that draws nothing.
func newTransferProgress(w io.Writer, tty bool, label string, size int64) *transferProgress {
	if !tty || size > 0 && size < progressMin {
		return &transferProgress{}
	}
	return &transferProgress{w: w, label: label}
}

// counting starts a phase whose bytes are counted (add): reading the
// input, writing the output.
func (p *transferProgress) counting(phase string, total int64) {
	if p.w == nil {
		return
	}
	p.stopTicker()
	p.mu.Lock()
	p.phase, p.done, p.total, p.start, p.pct = phase, 0, total, time.Now(), 0
	p.drawLocked()
	p.mu.Unlock()
}

// add counts n more bytes of the current phase.
func (p *transferProgress) add(n int) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	p.done += int64(n)
	if p.total > 0 && min(p.done, p.total)*100/p.total != p.pct || p.total <= 0 && time.Since(p.drawn) >= 100*time.Millisecond {
		p.drawLocked()
	}
	p.mu.Unlock()
}

// waiting starts a phase with no byte count (the request to the
// cluster): the elapsed time is redrawn until the next phase or end.
func (p *transferProgress) waiting(phase string) {
	if p.w == nil {
		return
	}
	p.stopTicker()
	p.mu.Lock()
	p.phase, p.done, p.total, p.start = phase, -1, 0, time.Now()
	p.drawLocked()
	stop := make(chan struct{})
	p.stopCh = stop
	p.mu.Unlock()
	p.wg.Add(1)
	go func() { // ends with the phase (stopTicker)
		defer p.wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.mu.Lock()
				p.drawLocked()
				p.mu.Unlock()
			}
		}
	}()
}

// end clears the line: the command's own output follows.
func (p *transferProgress) end() {
	if p.w == nil {
		return
	}
	p.stopTicker()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}

func (p *transferProgress) stopTicker() {
	p.mu.Lock()
	stop := p.stopCh
	p.stopCh = nil
	p.mu.Unlock()
	if stop != nil {
		close(stop)
		p.wg.Wait()
	}
}

func (p *transferProgress) drawLocked() {
	const bar = 24
	p.drawn = time.Now()
	var line string
	switch {
	case p.done < 0:
		line = fmt.Sprintf("%s: %s %.1fs", p.label, p.phase, time.Since(p.start).Seconds())
	case p.total > 0:
		n := int(min(p.done, p.total) * bar / p.total)
		p.pct = min(p.done, p.total) * 100 / p.total
		line = fmt.Sprintf("%s: %s [%s%s] %3d%% %s/%s", p.label, p.phase, strings.Repeat("#", n), strings.Repeat(".", bar-n),
			p.pct, bytesString(p.done), bytesString(p.total))
	default:
		line = fmt.Sprintf("%s: %s %s", p.label, p.phase, bytesString(p.done))
	}
	pad := max(0, p.width-len(line))
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.width = len(line)
}

// progressReader counts what is read through it.
type progressReader struct {
	r io.Reader
	p *transferProgress
}

func (r progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.p.add(n)
	return n, err
}

// progressWriter counts what is written through it.
type progressWriter struct {
	w io.Writer
	p *transferProgress
}

func (w progressWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.p.add(n)
	return n, err
}
