package bufalloc

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecideTakesHugePagesOnlyWhenClearlyCheaper(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		small, huge time.Duration
		err         error
		want        Pages
	}{
		{100 * ms, 10 * ms, nil, PagesHuge}, // a paravirtualized MMU: 4 KiB faults dear
		{12 * ms, 25 * ms, nil, PagesSmall}, // huge pages new to the host: dearer
		{10 * ms, 7 * ms, nil, PagesSmall},  // within the margin: keep the default
		{10 * ms, 5 * ms, nil, PagesHuge},   // past it
		{0, 0, nil, PagesSmall},             // nothing measured
		{100 * ms, 1 * ms, errors.New("no THP"), PagesSmall},
	} {
		got := decide(c.small, c.huge, 4<<20, c.err)
		if got.Pages != c.want {
			t.Errorf("decide(%v, %v, %v) = %v, want %v", c.small, c.huge, c.err, got.Pages, c.want)
		}
		if c.err == nil && got.SmallPerMiB != c.small/4 {
			t.Errorf("decide(%v, ...): %v per MiB, want %v", c.small, got.SmallPerMiB, c.small/4)
		}
		if c.err != nil && !strings.Contains(got.String(), "not measured") {
			t.Errorf("decide with an error says %q", got.String())
		}
	}
}

// The probe measures both kinds of pages, or says why it cannot.
func TestMeasureFirstTouch(t *testing.T) {
	small, huge, err := measureFirstTouch(probeBytes, 1)
	if err != nil {
		if !strings.Contains(err.Error(), "huge pages") {
			t.Fatalf("measureFirstTouch: %v", err)
		}
		return // a kernel without THP: the error names why
	}
	if small <= 0 || huge <= 0 {
		t.Fatalf("measureFirstTouch: small %v, huge %v: a fault costs CPU", small, huge)
	}
}

func TestParsePages(t *testing.T) {
	for in, want := range map[string]Pages{"auto": PagesUnchosen, "small": PagesSmall, "huge": PagesHuge} {
		p, auto, err := ParsePages(in)
		if err != nil || p != want || auto != (in == "auto") {
			t.Errorf("ParsePages(%q) = %v, %v, %v", in, p, auto, err)
		}
	}
	if _, _, err := ParsePages("big"); err == nil || !strings.Contains(err.Error(), "auto, small or huge") {
		t.Errorf("ParsePages(big): %v", err)
	}
}
