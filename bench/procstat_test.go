package bench

import (
	"io"
	"os"
	"syscall"
	"testing"
	"time"
)

// The system time read from /proc is the process's own stime: the same
// as getrusage reports, and it grows with work done in the kernel.
func TestProcCountersSystemTime(t *testing.T) {
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	before, err := readProcCounters(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Copies from /dev/zero are kernel work; read until the kernel has
	// counted at least 5 ticks of it (bounded: 64 GiB).
	buf := make([]byte, 1<<20)
	var after procCounters
	for i := 0; i < 64<<10; i++ {
		if _, err := io.ReadFull(zero, buf); err != nil {
			t.Fatal(err)
		}
		if i%256 != 255 {
			continue
		}
		if after, err = readProcCounters(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if after.sub(before).sysNs >= int64(50*time.Millisecond) {
			break
		}
	}
	if got := after.sub(before).sysNs; got < int64(50*time.Millisecond) {
		t.Fatalf("system time grew by %v over 64 GiB of reads from /dev/zero", time.Duration(got))
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	now, err := readProcCounters(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Both are the kernel's adjusted stime; they differ by the ticks
	// between the two reads at most.
	if d := time.Duration(ru.Stime.Nano() - now.sysNs); d < -30*time.Millisecond || d > 30*time.Millisecond {
		t.Fatalf("/proc says %v of system time, getrusage %v", time.Duration(now.sysNs), time.Duration(ru.Stime.Nano()))
	}
}
