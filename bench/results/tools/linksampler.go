//go:build ignore

// linksampler records every testbed host's up and down byte counters
// while a bench run goes on, for links.py:
//
//	go run bench/results/tools/linksampler.go -o run.samples &
//	hoplite bench allreduce --testbed ... ; kill %1
//
// Host i's upload is the rx counter of the bridge side of its veth
// (bench/testbed's PREFIX-vI), its download the tx counter. Each line is
// the sample's unix nanoseconds, then up and down bytes of host 0, host
// 1, ... It waits for the testbed's links to appear and opens them again
// when the testbed is made anew. It ends at -for, or on SIGTERM or
// SIGINT, writing what it holds.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	prefix := flag.String("prefix", "hpb", "the testbed's namespace prefix")
	hosts := flag.Int("hosts", 8, "the testbed's hosts")
	every := flag.Duration("every", 2*time.Millisecond, "the sampling interval")
	dur := flag.Duration("for", 30*time.Minute, "the longest the sampler runs")
	out := flag.String("o", "links.samples", "the output file")
	flag.Parse()
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	defer func() {
		if err := w.Flush(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		f.Close()
	}()
	var files []*os.File
	closeAll := func() {
		for _, x := range files {
			x.Close()
		}
		files = nil
	}
	open := func() bool {
		closeAll()
		for i := 0; i < *hosts; i++ {
			for _, k := range []string{"rx_bytes", "tx_bytes"} {
				x, err := os.Open(fmt.Sprintf("/sys/class/net/%s-v%d/statistics/%s", *prefix, i, k))
				if err != nil {
					closeAll()
					return false
				}
				files = append(files, x)
			}
		}
		return true
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	end := time.Now().Add(*dur)
	buf := make([]byte, 64)
	vals := make([]string, 0, 2**hosts)
	for time.Now().Before(end) {
		select {
		case <-stop:
			return
		default:
		}
		if files == nil && !open() {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		vals = vals[:0]
		for _, x := range files {
			n, _ := x.ReadAt(buf, 0) // a sysfs read returns the whole value with io.EOF
			s := strings.TrimSpace(string(buf[:n]))
			if _, err := strconv.ParseUint(s, 10, 64); err != nil {
				closeAll() // the link went away: the testbed is being made anew
				break
			}
			vals = append(vals, s)
		}
		if files == nil {
			continue
		}
		fmt.Fprintf(w, "%d %s\n", time.Now().UnixNano(), strings.Join(vals, " "))
		time.Sleep(*every)
	}
}
