package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runPeer runs one peer's script once per comparison with --reps
// (sequential runs), on the testbed the nodes used (they are stopped by
// then), and records its RESULT line. A missing or failing script marks
// the peer failed, with the reason.
func (r *runner) runPeer(ctx context.Context, si int) {
	s := r.systems[si]
	for gi, g := range r.groups {
		res := &r.res[gi][si]
		if !res.ok() {
			continue
		}
		r.seq++
		r.prog.step(fmt.Sprintf("%s %s (%d reps)", g.label(), s.name, r.o.Reps))
		pr, err := r.peerOnce(ctx, s, g, r.o.Reps, s.alg, "")
		r.prog.finish()
		if err != nil {
			r.fail(gi, si, err)
			continue
		}
		res.Reps, res.Median, res.Min, res.Max = pr.Reps, pr.Median, pr.Min, pr.Max
		res.CPUMedian = pr.CPU
		res.Timing = timingOf(s.name, pr.Timing)
		r.recordLoad(res)
		if pr.HasOwn {
			res.Extra = map[string]float64{"own_s": pr.Own, "start_skew_s": pr.Skew}
		}
		if pr.HasMachine {
			if res.Extra == nil {
				res.Extra = map[string]float64{}
			}
			res.Extra["machine_busy_s"] = pr.Machine
		}
		if alg, err := strconv.Atoi(pr.Algorithm); err == nil {
			if res.Extra == nil {
				res.Extra = map[string]float64{}
			}
			res.Extra["algorithm"] = float64(alg)
		} else if s.alg == "best" && pr.Algorithm != "" {
			// A named algorithm (Gloo's) does not fit Extra's numbers;
			// the report's notes say which one was fastest.
			r.notes = append(r.notes, fmt.Sprintf("%s %s: fastest algorithm %s", g.label(), s.name, pr.Algorithm))
		}
	}
}

// choosePeerAlgorithm runs best peer si's sweep for comparison gi before
// the rounds (interleaved runs): every algorithm with --reps, as a
// sequential run's one launch does, unrecorded. Its winner is pinned:
// the measured launches force it (peerRep), so that each round costs one
// algorithm's run rather than the sweep, and the column's times are not
// the minimum of several algorithms' single runs (which would favour
// the peer by noise alone).
func (r *runner) choosePeerAlgorithm(ctx context.Context, gi, si int) {
	s, g := r.systems[si], r.groups[gi]
	r.seq++
	r.prog.step(fmt.Sprintf("%s %s: choosing the algorithm (%d reps each, unrecorded)", g.label(), s.name, r.o.Reps))
	pr, err := r.peerOnce(ctx, s, g, r.o.Reps, s.alg, "-sweep")
	r.prog.finish()
	if err != nil {
		r.fail(gi, si, fmt.Errorf("choosing the best algorithm: %w", err))
		return
	}
	if pr.Algorithm == "" || pr.Algorithm == "best" {
		r.fail(gi, si, fmt.Errorf("the %s peer's best sweep named no algorithm to measure (algorithm=%q)", s.peer, pr.Algorithm))
		return
	}
	r.pinned[gi][si] = pr.Algorithm
	r.notes = append(r.notes, fmt.Sprintf("%s %s: fastest algorithm %s (an unrecorded sweep, %d reps each: median %s); its measured reps forced it",
		g.label(), s.name, pr.Algorithm, r.o.Reps, secs(pr.Median)))
}

// peerRep launches peer si for one measured repetition of comparison gi
// (interleaved runs): --reps 1, after the warm-up the script runs in
// every launch, with the algorithm its sweep chose if it is a best
// column. The first launch's failure fails the peer for good (a script
// that cannot run would fail every round, a timeout each time); a later
// one fails that repetition only, as for ours.
func (r *runner) peerRep(ctx context.Context, gi, si, rep int) {
	s, g := r.systems[si], r.groups[gi]
	alg := s.alg
	if p := r.pinned[gi][si]; p != "" {
		alg = p
	}
	r.seq++
	seq := r.seq
	r.prog.step(fmt.Sprintf("%s %s rep %d", g.label(), s.name, rep+1))
	pr, err := r.peerOnce(ctx, s, g, 1, alg, fmt.Sprintf("-rep%d", rep+1))
	r.prog.finish()
	if err == nil && r.pinned[gi][si] != "" && pr.Algorithm != alg {
		err = fmt.Errorf("the %s peer ran algorithm %q, not the %q its sweep chose", s.peer, pr.Algorithm, alg)
	}
	if err != nil {
		if len(r.times[gi][si]) == 0 && r.failed[gi][si] == 0 {
			r.fail(gi, si, err)
		} else {
			r.repFailed(gi, si, err)
		}
		return
	}
	// Rounded: a truncated 4.1 s would report 4.099999999.
	r.times[gi][si] = append(r.times[gi][si], time.Duration(math.Round(pr.Median*float64(time.Second))))
	r.order[gi][si] = append(r.order[gi][si], RepOrder{Rep: rep + 1, Seq: seq})
	res := &r.res[gi][si]
	r.recordLoad(res)
	res.Timing = timingOf(s.name, pr.Timing)
	if pr.CPU > 0 {
		res.CPU = append(res.CPU, pr.CPU)
	}
	if k, err := strconv.Atoi(pr.Algorithm); err == nil {
		if res.Extra == nil {
			res.Extra = map[string]float64{}
		}
		res.Extra["algorithm"] = float64(k)
	}
	// The slowest rank from its own start and the ranks' start skew, as
	// a broadcast of ours records them: the difference between the
	// peers' old way of timing and ours, in every repetition.
	if pr.HasOwn {
		addExtra(res, map[string]float64{"own_s": pr.Own, "start_skew_s": pr.Skew})
	}
	if pr.HasMachine {
		addExtra(res, map[string]float64{"machine_busy_s": pr.Machine})
	}
}

// startsLikeOurs says whether peer's script takes --start-lead-ms: its
// ranks start each repetition at a common scheduled instant and it times
// from the first start to the last end, as ours is timed.
func startsLikeOurs(peer string) bool { return peer == "mpi" || peer == "gloo" }

// peerOnce launches s's script once for comparison g: reps measured
// repetitions (after the script's own warm-up) with --algorithm alg
// ("": none), its log in the run's log dir under a name ending in
// logSuffix. It returns the RESULT line for g's op.
func (r *runner) peerOnce(ctx context.Context, s system, g group, reps int, alg, logSuffix string) (PeerResult, error) {
	script := filepath.Join(r.o.Testbed.PeersDir, s.peer, "run")
	if st, err := os.Stat(script); err != nil {
		return PeerResult{}, fmt.Errorf("%s: %w", script, err)
	} else if st.Mode()&0o111 == 0 {
		return PeerResult{}, fmt.Errorf("%s is not executable", script)
	}
	op, why := peerOp(s.peer, g)
	if why != "" {
		return PeerResult{}, fmt.Errorf("%s", why)
	}
	args := []string{"--op", op, "--size", strconv.FormatInt(g.size, 10), "--reps", strconv.Itoa(reps)}
	if g.hasInt {
		args = append(args, "--interval-ms", strconv.FormatFloat(float64(g.interval)/float64(time.Millisecond), 'f', 3, 64))
	}
	if alg != "" {
		args = append(args, "--algorithm", alg)
	}
	if startsLikeOurs(s.peer) {
		// The peer's ranks start at a common instant as far ahead as
		// ours's members do.
		args = append(args, "--start-lead-ms", strconv.FormatFloat(float64(startLead)/float64(time.Millisecond), 'f', -1, 64))
	}
	// Generous: a peer starts its own processes (mpirun, a Dask cluster,
	// Gloo's ranks) before its repetitions. A best sweep keeps the
	// patience of a sequential run's one launch of --reps, its reps
	// being each algorithm's.
	timeout := 5*time.Minute + time.Duration(reps+2)*10*g.ideal(r.o.Nodes, r.o.Bandwidth.BytesPerSecond())
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Named by the comparison's label: async's intervals of one size
	// would otherwise write over each other's logs.
	logPath := filepath.Join(r.logDir(), fmt.Sprintf("peer-%s-%s%s.log", s.name, strings.ReplaceAll(g.label(), " ", "-"), logSuffix))
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
