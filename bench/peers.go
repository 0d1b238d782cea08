package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runPeer runs one peer's script once per comparison, on the testbed the
// nodes used (they are stopped by then), and records its RESULT line. A
// missing or failing script marks the peer failed, with the reason.
func (r *runner) runPeer(ctx context.Context, si int) {
	s := r.systems[si]
	script := filepath.Join(r.o.Testbed.PeersDir, s.peer, "run")
	for gi, g := range r.groups {
		res := &r.res[gi][si]
		if !res.ok() {
			continue
		}
		r.prog.step(fmt.Sprintf("%s %s (%d reps)", g.label(), s.name, r.o.Reps))
		pr, err := r.peerOnce(ctx, script, s, g)
		r.prog.finish()
		if err != nil {
			r.fail(gi, si, err)
			continue
		}
		res.Reps, res.Median, res.Min, res.Max = pr.Reps, pr.Median, pr.Min, pr.Max
		res.CPUMedian = pr.CPU
		if alg, err := strconv.Atoi(pr.Algorithm); err == nil {
			res.Extra = map[string]float64{"algorithm": float64(alg)}
		} else if s.alg == "best" && pr.Algorithm != "" {
			// A named algorithm (Gloo's) does not fit Extra's numbers;
			// the report's notes say which one was fastest.
			r.notes = append(r.notes, fmt.Sprintf("%s %s: fastest algorithm %s", g.label(), s.name, pr.Algorithm))
		}
	}
}

func (r *runner) peerOnce(ctx context.Context, script string, s system, g group) (PeerResult, error) {
	if st, err := os.Stat(script); err != nil {
		return PeerResult{}, fmt.Errorf("%s: %w", script, err)
	} else if st.Mode()&0o111 == 0 {
		return PeerResult{}, fmt.Errorf("%s is not executable", script)
	}
	op, why := peerOp(s.peer, g)
	if why != "" {
		return PeerResult{}, fmt.Errorf("%s", why)
	}
	args := []string{"--op", op, "--size", strconv.FormatInt(g.size, 10), "--reps", strconv.Itoa(r.o.Reps)}
	if g.hasInt {
		args = append(args, "--interval-ms", strconv.FormatFloat(float64(g.interval)/float64(time.Millisecond), 'f', 3, 64))
	}
	if s.alg != "" {
		args = append(args, "--algorithm", s.alg)
	}
	// Generous: a peer starts its own processes (mpirun, a Dask cluster,
	// Gloo's ranks) before its repetitions.
	timeout := 5*time.Minute + time.Duration(r.o.Reps+2)*10*g.ideal(r.o.Nodes, r.o.Bandwidth.BytesPerSecond())
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	logPath := filepath.Join(r.tb.logDir, fmt.Sprintf("peer-%s-%s-%s.log", s.name, g.scenario, SizeName(g.size)))
	logFile, err := os.Create(logPath)
	if err != nil {
		return PeerResult{}, err
	}
	defer logFile.Close()
	var stdout bytes.Buffer
	cmd := exec.CommandContext(pctx, script, args...)
	// The peer runs on the run's N hosts, whatever the testbed has.
	cmd.Env = append(os.Environ(), "HOPLITE_TESTBED_HOSTS="+strings.Join(r.o.Testbed.Hosts[:r.o.Nodes], ","),
		"HOPLITE_TESTBED_NS="+strings.Join(r.o.Testbed.Namespaces[:r.o.Nodes], ","))
	cmd.Stdout, cmd.Stderr = &stdout, logFile
	cmd.WaitDelay = 10 * time.Second
	fmt.Fprintf(logFile, "$ %s %s\n", script, strings.Join(args, " "))
	err = cmd.Run()
	fmt.Fprintf(logFile, "--- stdout:\n%s", stdout.String())
	if err != nil {
		if pctx.Err() != nil {
			err = fmt.Errorf("no result within %v", timeout)
		}
		return PeerResult{}, fmt.Errorf("%s %s: %v; its log:\n%s", script, strings.Join(args, " "), err, tailFile(logPath, 8))
	}
	results, err := FindPeerResults(&stdout)
	if err != nil {
		return PeerResult{}, fmt.Errorf("%s: %w", script, err)
	}
	// The last RESULT line for the op (the MPI peer's best names the
	// algorithm it found best, not "best").
	for i := len(results) - 1; i >= 0; i-- {
		if pr := results[i]; pr.Op == op {
			if pr.Size != g.size {
				return PeerResult{}, fmt.Errorf("%s reports size=%d, asked for %d", script, pr.Size, g.size)
			}
			if pr.Nodes != r.o.Nodes {
				return PeerResult{}, fmt.Errorf("%s ran on nodes=%d, the run has %d", script, pr.Nodes, r.o.Nodes)
			}
			return pr, nil
		}
	}
	return PeerResult{}, fmt.Errorf("%s printed no RESULT line for op=%s; its log:\n%s", script, op, tailFile(logPath, 8))
}
