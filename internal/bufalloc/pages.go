package bufalloc

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Pages is how Make backs large buffers.
type Pages int32

const (
	// PagesUnchosen: nothing chose yet, so 4 KiB pages, the kernel's
	// default (a member's warm-up chooses).
	PagesUnchosen Pages = iota
	// PagesSmall: 4 KiB pages.
	PagesSmall
	// PagesHuge: transparent huge pages for the whole 2 MiB pages of
	// every buffer of HugeMin bytes or more.
	PagesHuge
)

// String is the name `hoplite node -pages` takes.
func (p Pages) String() string {
	switch p {
	case PagesSmall:
		return "small"
	case PagesHuge:
		return "huge"
	default:
		return "unchosen"
	}
}

// ParsePages reads `-pages`: auto (measure), small or huge.
func ParsePages(s string) (p Pages, auto bool, err error) {
	switch s {
	case "auto", "":
		return PagesUnchosen, true, nil
	case "small":
		return PagesSmall, false, nil
	case "huge":
		return PagesHuge, false, nil
	}
	return 0, false, fmt.Errorf("pages %q: want auto, small or huge", s)
}

var (
	pages     atomic.Int32
	choiceMu  sync.Mutex
	choice    Choice
	choseOnce bool
)

func hugeChosen() bool { return Pages(pages.Load()) == PagesHuge }

// Current is how Make backs large buffers now.
func Current() Pages { return Pages(pages.Load()) }

// SetPages forces the choice for this process (ChoosePages then keeps
// it). It is for an operator's flag and for benchmarks that compare the
// two; a library's callers leave it to ChoosePages.
func SetPages(p Pages) {
	choiceMu.Lock()
	defer choiceMu.Unlock()
	pages.Store(int32(p))
	choice = Choice{Pages: p, Forced: true}
	choseOnce = true
}

// Choice is what ChoosePages decided and what it measured: the CPU that
// the first touch of fresh memory cost per MiB, with 4 KiB pages and
// with huge pages asked for.
type Choice struct {
	Pages       Pages
	Forced      bool // set by SetPages, nothing measured
	SmallPerMiB time.Duration
	HugePerMiB  time.Duration
	// Err says why nothing could be measured (no transparent huge pages,
	// no mmap): the choice is then small pages.
	Err error
}

// String says the choice and why, for a log line.
func (c Choice) String() string {
	switch {
	case c.Forced:
		return c.Pages.String() + " pages (forced)"
	case c.Err != nil:
		return fmt.Sprintf("%s pages (not measured: %v)", c.Pages, c.Err)
	}
	return fmt.Sprintf("%s pages (first touch %v/MiB with huge pages, %v/MiB with 4 KiB)",
		c.Pages, c.HugePerMiB.Round(time.Microsecond), c.SmallPerMiB.Round(time.Microsecond))
}

// hugeWins is how much cheaper huge pages must be to be chosen: a margin
// against a measurement taken while the machine does other work.
const hugeWins = 0.6

// probeBytes is how much fresh memory each measurement touches: two
// whole huge pages, a few milliseconds of faults where they are dear.
const probeBytes = 4 << 20

// probeRounds alternate the two kinds of pages; the cheapest round of
// each counts, so a round that another thread slowed does not decide.
const probeRounds = 2

// ChoosePages measures, once per process, what the first touch of fresh
// memory costs this process's thread with 4 KiB pages and with huge
// pages, and makes Make ask for huge pages if they cost less than
// hugeWins of the other. It costs about 2 x probeRounds x probeBytes of
// faults (a few to some tens of milliseconds), so a member runs it at
// warm-up, before it reports ready. Later calls, and calls after
// SetPages, return the choice already made.
func ChoosePages() Choice {
	choiceMu.Lock()
	defer choiceMu.Unlock()
	if choseOnce {
		return choice
	}
	choseOnce = true
	small, huge, err := measureFirstTouch(probeBytes, probeRounds)
	c := decide(small, huge, probeBytes, err)
	choice = c
	pages.Store(int32(c.Pages))
	return c
}

// decide is ChoosePages' rule for what it measured over n bytes.
func decide(small, huge time.Duration, n int, err error) Choice {
	c := Choice{Pages: PagesSmall}
	if err != nil {
		c.Err = err
		return c
	}
	mib := time.Duration(max(n>>20, 1))
	c.SmallPerMiB, c.HugePerMiB = small/mib, huge/mib
	if small > 0 && huge > 0 && float64(huge) < hugeWins*float64(small) {
		c.Pages = PagesHuge
	}
	return c
}
