// Command wakeprobe measures what waking costs a parked process on this
// machine: how much longer a hop takes through a Go process at
// GOMAXPROCS 1 (as the testbed's nodes run) that has idled on its socket
// for a while than through one that relayed a chunk a moment ago. It is
// the simulator's wake-up term (sim.Params.Wake and WakeAfter).
//
// The probe starts --procs relay processes of itself (GOMAXPROCS 1, as
// the testbed's nodes run), chained over loopback TCP from the probe and
// back to it: each reads a whole chunk of --chunk bytes, then writes it
// on, as the data plane relays a chunk. The probe sends trains of
// --chunks chunks --period apart (a link's pace: 64 KiB at 400 Mbit/s is
// 1.37 ms), --gap between trains, and times each chunk around the ring.
// A chunk's hop is the ring's time divided by its procs+1 hops. The
// first chunk of a train finds every relay idle for --gap, the others
// idle for about --period less a hop: the difference of their hops is
// what the longer idle costs (the netpoller's thread woken from a longer
// sleep, the goroutine scheduled, caches cold). The relays' CPU (their
// rusage, read at the end, divided by the hops they made) is printed
// too; it is an upper bound of a hop's CPU, as it counts each relay's
// start and its runtime's own work between chunks.
//
//	go run ./bench/wakeprobe --procs 8 --chunk 64KiB --period 1.37ms --chunks 16 --trains 60 --gap 50ms
//
// It prints the hop's quartiles and mean for the first chunk of a train
// and for the rest, and the one-minute load average before and after
// (the machine is shared: a loaded one's hops have a long tail of waits
// for a core, which the mean shows and the median does not).
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wakeprobe:", err)
		os.Exit(1)
	}
}

func run() error {
	relay := flag.String("relay", "", "internal: run as a relay to this address")
	procs := flag.Int("procs", 8, "relay processes in the ring")
	chunk := flag.Int("chunk", 64<<10, "bytes a relay reads whole before it writes them on")
	period := flag.Duration("period", 1370*time.Microsecond, "time between two chunks of a train")
	chunks := flag.Int("chunks", 16, "chunks per train")
	trains := flag.Int("trains", 60, "trains")
	gap := flag.Duration("gap", 50*time.Millisecond, "idle time between trains")
	flag.Parse()
	if *relay != "" {
		return relayMain(*relay, *chunk)
	}
	if *procs < 1 || *chunk < 8 || *chunks < 1 || *trains < 1 {
		return errors.New("need --procs >= 1, --chunk >= 8, --chunks >= 1, --trains >= 1")
	}
	return probe(*procs, *chunk, *period, *chunks, *trains, *gap)
}

// relayMain is one relay: it listens, says where, dials next, and then
// copies whole chunks from its one inbound connection to next until EOF,
// when it reports its CPU time in microseconds.
func relayMain(next string, chunk int) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	out, err := net.Dial("tcp", next)
	if err != nil {
		return err
	}
	fmt.Printf("listening %s\n", ln.Addr())
	in, err := ln.Accept()
	if err != nil {
		return err
	}
	buf := make([]byte, chunk)
	for {
		if _, err := io.ReadFull(in, buf); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return err
		}
		if _, err := out.Write(buf); err != nil {
			return err
		}
	}
	out.Close()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return err
	}
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	fmt.Printf("cpu_us %d\n", cpu.Microseconds())
	return nil
}

type relayProc struct {
	cmd *exec.Cmd
	out *bufio.Scanner
}

func probe(procs, chunk int, period time.Duration, chunks, trains int, gap time.Duration) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	back, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer back.Close()
	// Start the ring from its end: the last relay dials the probe, each
	// other relay the one after it.
	next := back.Addr().String()
	relays := make([]*relayProc, procs)
	for i := procs - 1; i >= 0; i-- {
		cmd := exec.Command(self, "-relay", next, "-chunk", strconv.Itoa(chunk))
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		defer cmd.Process.Kill()
		r := &relayProc{cmd: cmd, out: bufio.NewScanner(stdout)}
		relays[i] = r
		if !r.out.Scan() {
			return fmt.Errorf("relay %d did not start", i)
		}
		addr, ok := strings.CutPrefix(r.out.Text(), "listening ")
		if !ok {
			return fmt.Errorf("relay %d: %q", i, r.out.Text())
		}
		next = addr
	}
	in, err := back.Accept()
	if err != nil {
		return err
	}
	out, err := net.Dial("tcp", next)
	if err != nil {
		return err
	}
	total := chunks * trains
	sent := make([]time.Time, total)
	got := make([]time.Duration, total)
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, chunk)
		for range total {
			if _, err := io.ReadFull(in, buf); err != nil {
				done <- err
				return
			}
			seq := binary.LittleEndian.Uint64(buf)
			got[seq] = time.Since(sent[seq])
		}
		done <- nil
	}()
	load0 := loadAvg()
	buf := make([]byte, chunk)
	for t := range trains {
		time.Sleep(gap)
		start := time.Now()
		for c := range chunks {
			seq := t*chunks + c
			time.Sleep(time.Until(start.Add(time.Duration(c) * period)))
			binary.LittleEndian.PutUint64(buf, uint64(seq))
			sent[seq] = time.Now()
			if _, err := out.Write(buf); err != nil {
				return err
			}
		}
	}
	if err := <-done; err != nil {
		return err
	}
	load1 := loadAvg()
	out.Close()
	var cpu time.Duration
	for i, r := range relays {
		for r.out.Scan() {
			if v, ok := strings.CutPrefix(r.out.Text(), "cpu_us "); ok {
				us, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return err
				}
				cpu += time.Duration(us) * time.Microsecond
			}
		}
		if err := r.cmd.Wait(); err != nil {
			return fmt.Errorf("relay %d: %w", i, err)
		}
	}
	hops := procs + 1
	var first, rest []time.Duration
	for seq, d := range got {
		if seq%chunks == 0 {
			first = append(first, d/time.Duration(hops))
		} else {
			rest = append(rest, d/time.Duration(hops))
		}
	}
	// The relays' CPU covers their start and the connections too; over
	// thousands of chunks that is noise.
	hopCPU := cpu / time.Duration(total*procs)
	fmt.Printf("procs %d, chunk %d B, period %v, %d trains of %d chunks, gap %v, load %s -> %s\n",
		procs, chunk, period, trains, chunks, gap, load0, load1)
	fmt.Printf("cpu per hop, at most (the relays' rusage / their hops): %v\n", hopCPU.Round(time.Microsecond))
	report := func(what string, ds []time.Duration) {
		if len(ds) == 0 {
			return
		}
		slices.Sort(ds)
		q := func(f float64) time.Duration { return ds[int(f*float64(len(ds)-1))].Round(time.Microsecond) }
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		mean := (sum / time.Duration(len(ds))).Round(time.Microsecond)
		fmt.Printf("%-30s hop p25 %v  median %v  p75 %v  p90 %v  mean %v  (%d chunks)\n",
			what, q(0.25), q(0.5), q(0.75), q(0.9), mean, len(ds))
	}
	report(fmt.Sprintf("first of a train (idle %v):", gap), first)
	report(fmt.Sprintf("rest (idle ~%v):", period), rest)
	return nil
}

// loadAvg is the one-minute load average ("?" if unknown).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}
