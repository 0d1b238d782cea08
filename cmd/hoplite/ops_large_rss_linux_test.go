package main

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// peakRSS follows process pid's peak resident memory (VmHWM, bytes)
// until stop, which returns the last reading. Not the rusage of its end:
// Go starts a child with the parent's memory map until exec, and Linux
// counts that map's high-water mark into the child's ru_maxrss, so a
// large test process would be charged to every command it runs.
func peakRSS(pid int) (stop func() int64) {
	done, peak := make(chan struct{}), make(chan int64, 1)
	go func() {
		var last int64
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v := vmHWM(pid); v > last {
				last = v
			}
			select {
			case <-done:
				peak <- last
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-peak
	}
}

// vmHWM reads /proc/pid/status's VmHWM (0 once the process is gone).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("VmHWM:")); ok {
			f := bytes.Fields(v)
			if len(f) > 0 {
				kib, _ := strconv.ParseInt(string(f[0]), 10, 64)
				return kib << 10
			}
		}
	}
	return 0
}
