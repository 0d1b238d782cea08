package bufalloc

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// With huge pages chosen, a large buffer's whole 2 MiB pages carry the
// advice ("hg" in the flags of the mapping that holds them); a small
// buffer's never do. And ChoosePages keeps a forced choice.
func TestMakeAdvisesHugePages(t *testing.T) {
	SetPages(PagesHuge)
	defer SetPages(PagesUnchosen)
	if c := ChoosePages(); c.Pages != PagesHuge || !c.Forced {
		t.Fatalf("ChoosePages after SetPages(huge) = %+v", c)
	}
	const thp = "/sys/kernel/mm/transparent_hugepage/enabled"
	if _, err := os.Stat(thp); errors.Is(err, fs.ErrNotExist) {
		// No transparent huge pages: the probe must say so, and the
		// choice stay small.
		if _, _, err := measureFirstTouch(probeBytes, 1); err == nil {
			t.Fatalf("no %s, yet the probe measured huge pages", thp)
		}
		return
	}
	for _, n := range []int{HugeMin, 3*HugeMin + 12345} {
		big := Make(n)
		if len(big) != n || cap(big) != n {
			t.Fatalf("Make(%d): len %d, cap %d", n, len(big), cap(big))
		}
		// Aligned, so that every whole 2 MiB of it is a huge page: a
		// 4 MiB buffer two of them, not one.
		start := uintptr(unsafe.Pointer(unsafe.SliceData(big)))
		if start%hugePage != 0 {
			t.Fatalf("Make(%d) starts at %#x, not on a huge page boundary", n, start)
		}
		last := (start + uintptr(n) - hugePage) &^ (hugePage - 1) // the last whole huge page
		for _, a := range []uintptr{start, last} {
			if flags := vmFlags(t, a); !strings.Contains(" "+flags+" ", " hg ") {
				t.Fatalf("the mapping holding %#x of a %d-byte buffer has flags %q, want hg", a, n, flags)
			}
		}
		for i := range big {
			big[i] = byte(i)
		}
		if big[n-1] != byte(n-1) {
			t.Fatalf("Make(%d): the last byte does not stick", n)
		}
	}
	before := advised.Load()
	if small := Make(64 << 10); len(small) != 64<<10 || advised.Load() != before {
		t.Fatalf("a 64 KiB buffer was advised huge pages (%d madvise calls)", advised.Load()-before)
	}
}

// vmFlags are the VmFlags of the mapping of this process that holds a.
func vmFlags(t *testing.T, a uintptr) string {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		if lo, hi, ok := mappingRange(line); ok {
			in = lo <= a && a < hi
			continue
		}
		if in {
			if rest, ok := strings.CutPrefix(line, "VmFlags:"); ok {
				return strings.TrimSpace(rest)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("no mapping holds %#x", a)
	return ""
}

// mappingRange parses a smaps header line ("lo-hi perms ...").
func mappingRange(line string) (lo, hi uintptr, ok bool) {
	r, _, found := strings.Cut(line, " ")
	l, h, dash := strings.Cut(r, "-")
	if !found || !dash {
		return 0, 0, false
	}
	a, err1 := strconv.ParseUint(l, 16, 64)
	b, err2 := strconv.ParseUint(h, 16, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return uintptr(a), uintptr(b), true
}
