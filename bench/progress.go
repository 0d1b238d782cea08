package bench

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// progress draws `[#####.....] 12/40 broadcast 32MiB ours rep 2` on one
// line (a terminal) or one line per step (a file or pipe).
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	total int
	done  int
	width int // of the last line drawn (tty), to clear it
}

func newProgress(w io.Writer, tty bool, total int) *progress {
	return &progress{w: w, tty: tty, total: max(total, 1)}
}

// step draws the bar for the step that starts now.
func (p *progress) step(what string) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(what)
}

// finish counts a step as done.
func (p *progress) finish() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.done = min(p.done+1, p.total)
	p.mu.Unlock()
}

func (p *progress) draw(what string) {
	const bar = 20
	n := p.done * bar / p.total
	line := fmt.Sprintf("[%s%s] %d/%d %s", strings.Repeat("#", n), strings.Repeat(".", bar-n), p.done, p.total, what)
	if p.tty {
		pad := max(0, p.width-len(line))
		fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
		p.width = len(line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// close ends the bar's line.
func (p *progress) close() {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw("done")
	if p.tty {
		fmt.Fprintln(p.w)
	}
}

// logf prints a line between progress redraws.
func (p *progress) logf(format string, args ...any) {
	if p == nil || p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty && p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
	fmt.Fprintf(p.w, format+"\n", args...)
}
