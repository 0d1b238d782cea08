package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// LoadSpinCommand is the hidden `hoplite bench` scenario a load process
// runs (Options.Load): Spin until its deadline or until its standard
// input closes.
const LoadSpinCommand = "load-spin"

// DefaultLoadFor bounds a load process's life when Options.LoadFor is 0:
// whatever happens to the run, no load process outlives it by more.
const DefaultLoadFor = 2 * time.Hour

// Spin is a load process's body: it keeps one CPU busy until until, or
// until in reaches its end (the run closed it, or the run's process is
// gone: a pipe's last writer exiting closes it, whatever killed it).
// Nothing else: no memory grows, no file is written.
func Spin(in io.Reader, until time.Time) {
	runtime.GOMAXPROCS(1)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(done)
	}()
	x := uint64(1)
	for {
		// Check the clock and the pipe every few million steps: a few
		// milliseconds of work, so the stop is prompt and the loop spends
		// nearly all its time on the CPU.
		for range 1 << 22 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if x == 0 || !time.Now().Before(until) { // x == 0: keeps the loop from being optimised away
			return
		}
		select {
		case <-done:
			return
		default:
		}
	}
}

// loadProcs are the run's CPU-bound processes (Options.Load).
type loadProcs struct {
	cmds   []*exec.Cmd
	stdins []io.WriteCloser
	waited []chan error
}

// startLoad starts n copies of argv (each then given `--for D` with D
// the bound) as CPU-bound processes beside the cluster. Each stops by
// itself after bound, when its standard input closes (stop, or this
// process's end, however it ends), or with its parent (Linux's parent
// death signal).
func startLoad(n int, bound time.Duration, argv []string) (*loadProcs, error) {
	if n <= 0 {
		return &loadProcs{}, nil
	}
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		argv = []string{exe, "bench", LoadSpinCommand}
	}
	l := &loadProcs{}
	for range n {
		args := append(append([]string(nil), argv[1:]...), "--for", bound.String())
		cmd := exec.Command(argv[0], args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := cmd.StdinPipe()
		if err != nil {
			l.stop(context.Background())
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			l.stop(context.Background())
			return nil, fmt.Errorf("start load process %s: %w", argv[0], err)
		}
		w := make(chan error, 1)
		go func() { w <- cmd.Wait() }()
		l.cmds, l.stdins, l.waited = append(l.cmds, cmd), append(l.stdins, in), append(l.waited, w)
	}
	return l, nil
}

// pids are the load processes' ids.
func (l *loadProcs) pids() []int {
	var out []int
	for _, c := range l.cmds {
		out = append(out, c.Process.Pid)
	}
	return out
}

// stop closes every load process's input and waits for it to end, killing
// one that has not ended when ctx does (or within 10 s without a
// deadline). It returns once every one has been reaped.
func (l *loadProcs) stop(ctx context.Context) error {
	for _, in := range l.stdins {
		_ = in.Close()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	var errs []error
	for i, w := range l.waited {
		select {
		case <-w:
		case <-ctx.Done():
			_ = l.cmds[i].Process.Kill()
			<-w
			errs = append(errs, fmt.Errorf("load process %d did not stop when asked: killed", l.cmds[i].Process.Pid))
		}
	}
	l.cmds, l.stdins, l.waited = nil, nil, nil
	return errors.Join(errs...)
}

// LoadAvg is the machine's load average over the last minute
// (/proc/loadavg); ok is false where there is none.
func LoadAvg() (load float64, ok bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil
}

// RunLoad is the load a run saw: Options.Load's processes and the
// machine's one-minute load average when the run started and ended, and
// its least and greatest over the recorded repetitions.
type RunLoad struct {
	// Procs is the number of CPU-bound processes the run started beside
	// the cluster (hoplite bench --load).
	Procs    int     `json:"procs"`
	CPUs     int     `json:"cpus"`
	Start    float64 `json:"load_1m_start"`
	End      float64 `json:"load_1m_end"`
	Min      float64 `json:"load_1m_min"`
	Max      float64 `json:"load_1m_max"`
	Measured bool    `json:"measured"`
}

// LoadDiffers says whether two systems' median one-minute loads a and b
// (on a machine of cpus CPUs) differ enough that their times do not
// compare: by a whole CPU's worth of runnable work or more, a quarter
// of the CPUs on a larger machine, and a quarter of the larger load on a
// machine that busy already (19 against 20 runnable on 2 CPUs is one
// condition, not two).
func LoadDiffers(a, b float64, cpus int) bool {
	if a <= 0 && b <= 0 {
		return false
	}
	return math.Abs(a-b) >= max(1, 0.25*float64(cpus), 0.25*max(a, b))
}

// loadNow reads the one-minute load average (Options.loadAvg in tests).
func (o *Options) loadNow() (float64, bool) {
	if o.loadAvg != nil {
		return o.loadAvg()
	}
	return LoadAvg()
}

// recordLoad adds the load average now to res (a recorded repetition
// just ended) and to the run's range.
func (r *runner) recordLoad(res *Result) {
	v, ok := r.o.loadNow()
	if !ok {
		return
	}
	res.Load = append(res.Load, v)
	res.LoadMedian = medianOf(res.Load)
	if !r.load.Measured || v < r.load.Min {
		r.load.Min = v
	}
	if !r.load.Measured || v > r.load.Max {
		r.load.Max = v
	}
	r.load.Measured = true
}
