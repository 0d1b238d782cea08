package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procCounters are what the kernel counted for a backend's processes:
// where a first operation's time goes that its own clock does not show.
type procCounters struct {
	// minflt are minor page faults: memory the process touches for the
	// first time since the kernel gave it (fresh heap, new buffers).
	minflt int64
	// runqNs is the time the processes' threads were runnable but waited
	// for a CPU (schedstat's run delay): the machine's contention.
	runqNs int64
	// ctxsw are the threads' context switches, voluntary and not.
	ctxsw int64
	// sysNs is the CPU time the kernel spent for the processes (stime:
	// system calls, the TCP stack's copies and checksums, page faults),
	// in the kernel's clock ticks (10 ms), so meaningful summed over
	// operations and processes rather than for one short operation.
	sysNs int64
}

func (c procCounters) sub(o procCounters) procCounters {
	return procCounters{minflt: c.minflt - o.minflt, runqNs: c.runqNs - o.runqNs, ctxsw: c.ctxsw - o.ctxsw, sysNs: c.sysNs - o.sysNs}
}

func (c procCounters) add(o procCounters) procCounters {
	return procCounters{minflt: c.minflt + o.minflt, runqNs: c.runqNs + o.runqNs, ctxsw: c.ctxsw + o.ctxsw, sysNs: c.sysNs + o.sysNs}
}

// procCounter is a backend whose processes' counters can be read (Linux).
type procCounter interface {
	procCounters() (procCounters, error)
}

// readProcCounters reads pid's counters from /proc: its minor faults
// and system time (/proc/PID/stat, every thread's), and the run delay and context
// switches of each of its threads alive now (a thread that ended took
// its own with it).
func readProcCounters(pid int) (procCounters, error) {
	var c procCounters
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return c, err
	}
	// pid (comm) state ppid ... : fields after the comm's closing paren;
	// minflt is the 10th field of the line, the 8th after it; stime the
	// 15th, the 13th after it.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return c, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return c, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	if c.minflt, err = strconv.ParseInt(f[7], 10, 64); err != nil {
		return c, fmt.Errorf("/proc/%d/stat minflt: %w", pid, err)
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return c, fmt.Errorf("/proc/%d/stat stime: %w", pid, err)
	}
	// USER_HZ: the kernel reports these in 1/100 s on every Linux ABI.
	c.sysNs = stime * int64(10*time.Millisecond)
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		// on-CPU ns, run-delay ns, timeslices
		if f := strings.Fields(string(b)); len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			c.runqNs += v
		}
		st, err := os.ReadFile(filepath.Join(filepath.Dir(t), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(st), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				c.ctxsw += n
			}
		}
	}
	return c, nil
}

// procCounters sums the live node processes' counters.
func (ns *nodeSet) procCounters() (procCounters, error) {
	var total procCounters
	for _, p := range ns.procs {
		if !ns.alive(p) || p.cmd.Process == nil {
			continue
		}
		c, err := readProcCounters(p.cmd.Process.Pid)
		if err != nil {
			return total, err
		}
		total = total.add(c)
	}
	return total, nil
}

// procCounters are this process's: the embedded cluster's members share
// it with the driver.
func (b *localBackend) procCounters() (procCounters, error) { return readProcCounters(os.Getpid()) }
