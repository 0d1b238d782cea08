// Command mapreduce is the paper's MapReduce experiment (Albrecht et al.
// 2006, sections 5.4 and 6) in miniature on an embedded Hoplite cluster.
//
// A controller spreads 18 map tasks over 6 nodes, 3 each; every node runs
// its tasks one after the other. Two nodes are injected stragglers, 30
// times slower. A map task counts words in its split, Puts the counts into
// the object store and enters the "map" barrier with its task label, so
// the barrier waits for 18 logical tasks, not for hosts. The controller's
// entry callback watches the arrivals: when the knee detector finds the
// point where completions slow down, it respawns the outstanding tasks on
// idle nodes. (The callback's own timeout is the fallback: no completion
// for a while after half the tasks counts as a slowdown too, should noise
// hide the knee.) Whichever copy of a task finishes first enters; the
// other is refused as a duplicate label and discarded. Once all 18 labels
// passed, a Hoplite Reduce sums the winners' counts (Hosts() says which
// copy won).
//
// The program runs twice, with and without the respawn, and prints the
// completions over time for both.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// vocabulary is what the map tasks count.
var vocabulary = []string{"barrier", "knee", "map", "reduce", "straggler", "task", "node", "object"}

// setup is one MapReduce run.
type setup struct {
	respawn    bool          // respawn outstanding tasks at the knee
	nodes      int           // nodes running map tasks
	perNode    int           // map tasks per node
	slow       int           // the last slow nodes are stragglers
	unit       time.Duration // one map task on a healthy node
	slowFactor int           // a straggler takes slowFactor units
	words      int           // words per split
}

func defaultSetup(respawn bool) setup {
	return setup{respawn: respawn, nodes: 6, perNode: 3, slow: 2, unit: 10 * time.Millisecond, slowFactor: 30, words: 400}
}

func (s setup) tasks() int           { return s.nodes * s.perNode }
func (s setup) isSlow(node int) bool { return node >= s.nodes-s.slow }

// report is what a run observed. Everything but elapsed is an order of
// events, not a time.
type report struct {
	elapsed time.Duration // until every map task passed the barrier
	// slowTasks is the number of tasks first placed on straggler nodes;
	// stragglersBeforeDone how many of those original attempts finished
	// their work before all map tasks had passed.
	slowTasks, stragglersBeforeDone int
	// slowdownAt is the number of completed tasks when the controller saw
	// the slowdown (0: never), byKnee whether the knee detector saw it
	// (rather than the callback timeout); respawned counts copies started,
	// wonByCopies the tasks whose copy passed the barrier.
	slowdownAt, respawned, wonByCopies int
	byKnee                             bool
	counts                             []int64 // the reduced word counts
}

type attempt struct {
	task int
	copy bool
}

func label(task int) string { return fmt.Sprintf("map-%02d", task) }

// split is task's input: words drawn from the vocabulary, reproducibly.
func split(task, words int) []string {
	r := rand.New(rand.NewPCG(uint64(task), 42))
	out := make([]string, words)
	for i := range out {
		out[i] = vocabulary[r.IntN(len(vocabulary))]
	}
	return out
}

// expected is the word count over all splits, computed directly.
func expected(s setup) []int64 {
	counts := make([]int64, len(vocabulary))
	for t := range s.tasks() {
		for i, c := range countWords(split(t, s.words)) {
			counts[i] += c
		}
	}
	return counts
}

func countWords(words []string) []int64 {
	counts := make([]int64, len(vocabulary))
	for _, w := range words {
		for i, v := range vocabulary {
			if w == v {
				counts[i]++
			}
		}
	}
	return counts
}

func encode(counts []int64) []byte {
	b := make([]byte, 8*len(counts))
	for i, c := range counts {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(c))
	}
	return b
}

func decode(b []byte) []int64 {
	out := make([]int64, len(b)/8)
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return out
}

// controller is the state of one run shared by its goroutines.
type controller struct {
	s        setup
	l        *cluster.Local
	run      string
	out      io.Writer
	start    time.Time
	queues   []chan attempt
	mu       sync.Mutex
	seq      int          // event counter: orders finishes against the end
	done     map[int]bool // tasks whose work finished (any copy)
	tries    map[int]int  // attempts started per task
	busy     []int        // attempts queued or running per node
	slowed   bool         // the knee (or a long silence) was seen
	over     bool         // all map tasks passed: print nothing more
	finishes []finish
	rep      report
}

type finish struct {
	task, node int
	copy       bool
	seq        int
}

func (c *controller) printf(format string, args ...any) {
	if !c.over {
		fmt.Fprintf(c.out, "  %+5dms  ", time.Since(c.start).Milliseconds())
		fmt.Fprintf(c.out, format+"\n", args...)
	}
}

// onEnter is the barrier's entry callback. It never fires the barrier
// early (all map tasks must complete); after the slowdown it keeps idle nodes
// busy with copies of the outstanding tasks.
func (c *controller) onEnter(con barrier.Consultation) bool {
	if !c.s.respawn {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.slowed {
		switch {
		case con.Knee:
			c.slowed, c.rep.byKnee = true, true
			c.printf("knee: arrivals slowed after %d of %d tasks; respawning outstanding tasks on idle nodes", len(c.done), c.s.tasks())
		case con.Label == "" && 2*len(c.done) >= c.s.tasks():
			c.slowed = true
			c.printf("no completion for %v after %d of %d tasks; respawning outstanding tasks on idle nodes", c.callbackTimeout(), len(c.done), c.s.tasks())
		}
		if c.slowed {
			c.rep.slowdownAt = len(c.done)
		}
	}
	if c.slowed {
		c.respawnLocked()
	}
	return false
}

// callbackTimeout is how long without a consultation before the barrier
// asks the callback anyway.
func (c *controller) callbackTimeout() time.Duration { return 5 * c.s.unit }

// respawnLocked gives each idle node a copy of an outstanding task, those
// on the busiest (slowest) nodes first.
func (c *controller) respawnLocked() {
	var todo []int
	for t := range c.s.tasks() {
		if !c.done[t] && c.tries[t] == 1 {
			todo = append(todo, t)
		}
	}
	home := func(t int) int { return t % c.s.nodes }
	sort.SliceStable(todo, func(i, j int) bool { return c.busy[home(todo[i])] > c.busy[home(todo[j])] })
	for n := range c.s.nodes {
		if len(todo) == 0 {
			return
		}
		if c.busy[n] > 0 {
			continue
		}
		t := todo[0]
		todo = todo[1:]
		c.tries[t]++
		c.busy[n]++
		c.rep.respawned++
		c.queues[n] <- attempt{task: t, copy: true}
		c.printf("respawn %s (on node-%d) as a copy on idle node-%d", label(t), home(t), n)
	}
}

// worker runs node n's map tasks one at a time; each finished task enters
// the barrier from its own goroutine (the task's process waiting there).
func (c *controller) worker(ctx context.Context, n int, h *barrier.Barrier, passed chan<- attempt, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		var a attempt
		select {
		case a = <-c.queues[n]:
		case <-ctx.Done():
			return
		}
		cost := c.s.unit
		if c.s.isSlow(n) {
			cost *= time.Duration(c.s.slowFactor)
		}
		select {
		case <-time.After(cost):
		case <-ctx.Done():
			return
		}
		id := fmt.Sprintf("mr/%s/%s@node-%d", c.run, label(a.task), n)
		if err := c.l.Client(n).Put(ctx, id, encode(countWords(split(a.task, c.s.words)))); err != nil {
			return // the run is over
		}
		c.mu.Lock()
		c.seq++
		c.finishes = append(c.finishes, finish{task: a.task, node: n, copy: a.copy, seq: c.seq})
		first := !c.done[a.task]
		c.done[a.task] = true
		c.busy[n]--
		what := ""
		switch {
		case a.copy:
			what = " (copy)"
		case c.s.isSlow(n):
			what = " (straggler)"
		}
		if first {
			c.printf("%2d/%d  %s done on node-%d%s", len(c.done), c.s.tasks(), label(a.task), n, what)
		}
		c.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.Enter(ctx, label(a.task))
			switch {
			case err == nil:
				select {
				case passed <- a:
				case <-ctx.Done():
				}
			case errors.Is(err, messages.ErrConflict):
				c.mu.Lock()
				c.printf("%s on node-%d finished after its other copy: discarded", label(a.task), n)
				c.mu.Unlock()
				_ = c.l.Client(n).Delete(ctx, id)
			}
		}()
	}
}

// mapReduce runs the map phase behind a barrier, then reduces.
func mapReduce(ctx context.Context, l *cluster.Local, out io.Writer, s setup, run string) (report, error) {
	c := &controller{s: s, l: l, run: run, out: out, done: map[int]bool{}, tries: map[int]int{}, busy: make([]int, s.nodes)}
	for range s.nodes {
		c.queues = append(c.queues, make(chan attempt, 2*s.tasks()))
	}
	name := "mapreduce-" + run
	ctrl, err := barrier.New(ctx, l, name, barrier.Max(s.tasks()),
		barrier.MinPercent(50), // knees before half the tasks are ignored
		barrier.OnEnter(c.onEnter, c.callbackTimeout()))
	if err != nil {
		return report{}, err
	}
	defer ctrl.Stop()
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	passed := make(chan attempt, 2*s.tasks())
	c.mu.Lock()
	c.start = time.Now()
	for t := range s.tasks() {
		n := t % s.nodes
		c.tries[t], c.busy[n] = 1, c.busy[n]+1
		c.queues[n] <- attempt{task: t}
		if s.isSlow(n) {
			c.rep.slowTasks++
		}
	}
	c.mu.Unlock()
	for n := range s.nodes {
		h, err := barrier.Open(ctx, l, name, barrier.Host(fmt.Sprintf("node-%d", n)))
		if err != nil {
			return report{}, err
		}
		defer h.Stop()
		wg.Add(1)
		go c.worker(runCtx, n, h, passed, &wg)
	}
	for got := 0; got < s.tasks(); got++ {
		select {
		case a := <-passed:
			if a.copy {
				c.rep.wonByCopies++
			}
		case <-ctx.Done():
			return report{}, fmt.Errorf("map phase did not finish: %w", ctx.Err())
		}
	}
	c.mu.Lock()
	c.rep.elapsed = time.Since(c.start)
	c.printf("all %d map tasks passed the barrier", s.tasks())
	c.over = true
	for _, f := range c.finishes {
		if s.isSlow(f.node) && !f.copy {
			c.rep.stragglersBeforeDone++
		}
	}
	rep := c.rep
	c.mu.Unlock()
	cancel() // stop the stragglers still working
	wg.Wait()

	// Reduce the winners' outputs: Hosts says which copy passed.
	hosts, err := ctrl.Hosts(ctx)
	if err != nil {
		return report{}, err
	}
	var sources []string
	for t := range s.tasks() {
		host, ok := hosts[label(t)]
		if !ok {
			return report{}, fmt.Errorf("%s never passed", label(t))
		}
		sources = append(sources, fmt.Sprintf("mr/%s/%s@%s", run, label(t), host))
	}
	target := "mr/" + run + "/counts"
	if _, err := l.Client(0).Reduce(ctx, target, sources, len(sources), messages.ReduceOp_SUM, messages.DType_INT64); err != nil {
		return report{}, fmt.Errorf("reduce: %w", err)
	}
	data, err := l.Client(0).Get(ctx, target)
	if err != nil {
		return report{}, err
	}
	rep.counts = decode(data)
	if err := ctrl.Close(ctx); err != nil {
		return report{}, err
	}
	return rep, nil
}

// run does both MapReduce runs on one embedded cluster and compares them.
func run(ctx context.Context, out io.Writer) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("mapreduce not started: %w", err)
	}
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	s := defaultSetup(true)
	l, err := cluster.StartLocal(cluster.Config{Nodes: s.nodes, Log: log})
	if err != nil {
		return err
	}
	defer l.Stop()
	fmt.Fprintf(out, "MapReduce: %d map tasks on %d nodes, %d each; node-%d..node-%d are %dx slower (injected stragglers)\n",
		s.tasks(), s.nodes, s.perNode, s.nodes-s.slow, s.nodes-1, s.slowFactor)
	want := expected(s)
	var reps []report
	for _, respawn := range []bool{true, false} {
		s.respawn = respawn
		title, runName := "with respawn at the knee", "respawn"
		if !respawn {
			title, runName = "waiting for the stragglers", "wait"
		}
		fmt.Fprintf(out, "\n%s:\n", title)
		rep, err := mapReduce(ctx, l, out, s, runName)
		if err != nil {
			return fmt.Errorf("%s: %w", title, err)
		}
		if fmt.Sprint(rep.counts) != fmt.Sprint(want) {
			return fmt.Errorf("%s: word counts %v, want %v", title, rep.counts, want)
		}
		var words []string
		for i, w := range vocabulary {
			words = append(words, fmt.Sprintf("%s=%d", w, rep.counts[i]))
		}
		fmt.Fprintf(out, "  reduced word counts: %s\n", strings.Join(words, " "))
		reps = append(reps, rep)
	}
	r, w := reps[0], reps[1]
	how := "the callback timeout"
	if r.byKnee {
		how = "the knee"
	}
	fmt.Fprintf(out, "\nwith respawn: done in %v; slowdown seen (by %s) after %d tasks; %d copies, %d won; %d of %d straggler tasks had finished\n",
		r.elapsed.Round(time.Millisecond), how, r.slowdownAt, r.respawned, r.wonByCopies, r.stragglersBeforeDone, r.slowTasks)
	fmt.Fprintf(out, "waiting:      done in %v; %d of %d straggler tasks had finished\n",
		w.elapsed.Round(time.Millisecond), w.stragglersBeforeDone, w.slowTasks)
	fmt.Fprintf(out, "speedup from respawning at the knee: %.1fx\n", float64(w.elapsed)/float64(r.elapsed))
	return nil
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mapreduce:", err)
		os.Exit(1)
	}
}
