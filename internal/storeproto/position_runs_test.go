package storeproto

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

func genTask(g int32, root bool) *messages.ReduceTask {
	return &messages.ReduceTask{ReduceId: "r", Position: 3, Generation: g, Root: root}
}

const coord = "coordinator"

// sentTypes names the messages a step sends, with their generation and
// whether they carry an error, for compact comparisons.
func sentTypes(s RunStep) []string {
	var out []string
	for _, snd := range s.Sends {
		if snd.To != coord {
			out = append(out, fmt.Sprintf("to %v", snd.To))
			continue
		}
		switch m := snd.Msg.(type) {
		case *messages.ReduceTaskStarted:
			out = append(out, fmt.Sprintf("started g%d err=%v", m.GetGeneration(), m.GetError() != nil))
		case *messages.ReduceTaskDone:
			out = append(out, fmt.Sprintf("done g%d err=%v", m.GetGeneration(), m.GetError() != nil))
		default:
			out = append(out, fmt.Sprintf("%T", m))
		}
	}
	return out
}

func wantRun(t *testing.T, s RunStep, gen int32) uint64 {
	t.Helper()
	if s.Run == nil {
		t.Fatalf("step %+v starts no run, want generation %d", s, gen)
	}
	if g := s.Run.Task.GetGeneration(); g != gen {
		t.Fatalf("run of generation %d, want %d", g, gen)
	}
	return s.Run.ID
}

func wantSends(t *testing.T, s RunStep, want ...string) {
	t.Helper()
	got := sentTypes(s)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sends %q, want %q", got, want)
	}
}

// The overlap the chained goroutines guarded against: a newer generation
// arrives while a run is still going. The new run must not start until
// the stopped one has ended, however late that is.
func TestPositionRunsNewGenerationWaitsForStoppedRun(t *testing.T) {
	p := NewPositionRuns(genTask(1, false), coord)
	r1 := wantRun(t, p.onStart(), 1)
	s := p.onNewTask(genTask(2, false))
	if s.Run != nil || s.Cancel != r1 {
		t.Fatalf("new generation while run %d active: %+v, want only its cancel", r1, s)
	}
	// A third generation before the stopped run noticed: still nothing
	// starts, and the queued second generation is superseded.
	if s := p.onNewTask(genTask(3, false)); s.Run != nil || s.Cancel != r1 {
		t.Fatalf("third generation: %+v", s)
	}
	// The stopped run reports its end: only now the newest starts.
	s = p.onRunEnded(r1, RunEnd{Report: true, Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "stopped")}, false)
	wantSends(t, s, "done g1 err=true")
	r3 := wantRun(t, s, 3)
	if r3 == r1 || p.Active() != r3 {
		t.Fatalf("active run %d, want the new run %d", p.Active(), r3)
	}
	// A late report of the old run changes nothing.
	if s := p.onRunEnded(r1, RunEnd{Report: true}, false); s.Run != nil || len(s.Sends) != 0 {
		t.Fatalf("late end of a finished run: %+v", s)
	}
}

func TestPositionRunsSteps(t *testing.T) {
	fail := messages.Errorf(messages.ErrorCode_INTERNAL, "boom")
	tests := []struct {
		name string
		root bool
		// steps drives p after Start (run 1 of generation 1 active); it
		// returns the last step for the checks below.
		steps      func(t *testing.T, p *PositionRuns, r1 uint64) RunStep
		wantSends  []string
		wantRewind bool
		wantRun    int32 // generation of a started run, 0 for none
		wantCancel bool
		release    bool
		keep       bool
	}{
		{
			name: "started and done are reported",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				wantSends(t, p.onRunStarted(r1, nil, false), "started g1 err=false")
				return p.onRunEnded(r1, RunEnd{Report: true}, false)
			},
			wantSends: []string{"done g1 err=false"},
		},
		{
			name: "a failed start is reported with its error",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				return p.onRunStarted(r1, fail, false)
			},
			wantSends: []string{"started g1 err=true"},
		},
		{
			name: "a silent end says nothing",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				return p.onRunEnded(r1, RunEnd{}, false)
			},
		},
		{
			name: "a dead node reports nothing",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				if s := p.onRunStarted(r1, nil, true); len(s.Sends) != 0 {
					t.Fatalf("dead node reported start: %v", sentTypes(s))
				}
				return p.onRunEnded(r1, RunEnd{Report: true, Err: fail}, true)
			},
		},
		{
			name: "invalidate stops the run and rewinds once it ended",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				s := p.onInvalidate(1)
				if s.Rewind || s.Cancel != r1 {
					t.Fatalf("invalidate during a run: %+v, want cancel without rewind", s)
				}
				return p.onRunEnded(r1, RunEnd{Report: true, Err: fail}, false)
			},
			wantSends:  []string{"done g1 err=true"},
			wantRewind: true,
		},
		{
			name: "invalidate while idle rewinds at once",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				p.onRunEnded(r1, RunEnd{}, false)
				return p.onInvalidate(1)
			},
			wantRewind: true,
		},
		{
			name: "a stale invalidate is ignored",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				p.onRunEnded(r1, RunEnd{}, false)
				wantRun(t, p.onNewTask(genTask(2, false)), 2)
				return p.onInvalidate(1)
			},
		},
		{
			name: "invalidate drops a queued run of its generation",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				p.onNewTask(genTask(2, false))
				p.onInvalidate(2)
				return p.onRunEnded(r1, RunEnd{}, false)
			},
			wantRewind: true,
		},
		{
			name: "a new generation after invalidate runs instead of the rewind",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				p.onInvalidate(1)
				p.onNewTask(genTask(2, false))
				return p.onRunEnded(r1, RunEnd{}, false)
			},
			wantRun: 2,
		},
		{
			name: "a duplicate generation is ignored",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				return p.onNewTask(genTask(1, false))
			},
		},
		{
			name: "release drops an intermediate output even if told to keep",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				return p.onRelease(true)
			},
			wantCancel: true, release: true, keep: false,
		},
		{
			name: "release keeps the target when told",
			root: true,
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				return p.onRelease(true)
			},
			wantCancel: true, release: true, keep: true,
		},
		{
			name: "release drops the target of a failed Reduce",
			root: true,
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				return p.onRelease(false)
			},
			wantCancel: true, release: true, keep: false,
		},
		{
			name: "coordinator gone keeps a complete target",
			root: true,
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				return p.onCoordinatorGone(true)
			},
			wantCancel: true, release: true, keep: true,
		},
		{
			name: "coordinator gone overtaking release: the release after it changes nothing",
			root: true,
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				p.onCoordinatorGone(true)
				return p.onRelease(false)
			},
		},
		{
			name: "after release a run's end reports nothing and starts nothing",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				p.onNewTask(genTask(2, false))
				p.onRelease(false)
				return p.onRunEnded(r1, RunEnd{Report: true}, false)
			},
		},
		{
			name: "stop cancels the active run",
			steps: func(t *testing.T, p *PositionRuns, r1 uint64) RunStep {
				return p.onStop()
			},
			wantCancel: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := NewPositionRuns(genTask(1, tc.root), coord)
			r1 := wantRun(t, p.onStart(), 1)
			s := tc.steps(t, p, r1)
			wantSends(t, s, tc.wantSends...)
			if s.Rewind != tc.wantRewind {
				t.Errorf("rewind %v, want %v", s.Rewind, tc.wantRewind)
			}
			if tc.wantRun == 0 && s.Run != nil {
				t.Errorf("started run of generation %d, want none", s.Run.Task.GetGeneration())
			} else if tc.wantRun != 0 {
				wantRun(t, s, tc.wantRun)
			}
			if (s.Cancel == r1) != tc.wantCancel {
				t.Errorf("cancel %d, want cancel of run %d: %v", s.Cancel, r1, tc.wantCancel)
			}
			if s.Release != tc.release || s.KeepOutput != tc.keep {
				t.Errorf("release %v keep %v, want %v %v", s.Release, s.KeepOutput, tc.release, tc.keep)
			}
		})
	}
}

// TestPositionRunsRandomInterleavings drives a position with seeded
// random events — runs that end late, invalidations, new generations,
// duplicates, a release — and checks after every step that at most one
// run or rewind is active (a rewind or run starts only while nothing
// runs), that a run only starts for the newest generation, and that once
// the events stop the newest generation has run last.
func TestPositionRunsRandomInterleavings(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 12))
			p := NewPositionRuns(genTask(1, rng.IntN(2) == 0), coord)
			gen := int32(1)
			var running uint64 // the run this test believes is going
			var lastRun int32  // generation of the latest run started
			released := false
			invalidated := false // the newest generation was invalidated
			check := func(what string, s RunStep) {
				t.Helper()
				if s.Cancel != 0 && s.Cancel != running {
					t.Fatalf("%s: cancels run %d, running %d", what, s.Cancel, running)
				}
				if s.Rewind && s.Run != nil {
					t.Fatalf("%s: rewind and run in one step", what)
				}
				if (s.Rewind || s.Run != nil) && running != 0 {
					t.Fatalf("%s: starts a run or rewind while run %d is active", what, running)
				}
				if s.Run != nil {
					if g := s.Run.Task.GetGeneration(); g != gen {
						t.Fatalf("%s: runs generation %d, newest is %d", what, g, gen)
					}
					running, lastRun = s.Run.ID, s.Run.Task.GetGeneration()
				}
				if released && (s.Run != nil || s.Rewind || len(s.Sends) > 0) {
					t.Fatalf("%s after release: %+v", what, s)
				}
				if s.Release {
					released = true
				}
				if p.Active() != running {
					t.Fatalf("%s: active %d, want %d", what, p.Active(), running)
				}
			}
			check("start", p.onStart())
			ended := map[uint64]bool{}
			for step := 0; step < 60; step++ {
				switch k := rng.IntN(10); {
				case k < 3 && running != 0:
					r := running
					running = 0
					ended[r] = true
					check("end", p.onRunEnded(r, RunEnd{Report: rng.IntN(2) == 0}, false))
				case k < 4 && len(ended) > 0:
					// A late duplicate end of some finished run.
					for r := range ended {
						check("late end", p.onRunEnded(r, RunEnd{Report: true}, false))
						break
					}
				case k < 6:
					if rng.IntN(4) > 0 {
						gen++
						invalidated = false
					}
					check("task", p.onNewTask(genTask(gen, p.Task().GetRoot())))
				case k < 8:
					g := gen - int32(rng.IntN(2))
					invalidated = invalidated || g >= gen
					check("invalidate", p.onInvalidate(g))
				case k < 9 && running != 0:
					check("started", p.onRunStarted(running, nil, false))
				case k == 9 && rng.IntN(8) == 0:
					check("release", p.onRelease(rng.IntN(2) == 0))
				}
			}
			// Drain: let every run end; then make sure the newest
			// generation is the one that ran last (unless released or its
			// run was invalidated, which a new generation repairs).
			for running != 0 {
				r := running
				running = 0
				check("drain", p.onRunEnded(r, RunEnd{}, false))
			}
			if !released && p.Task().GetGeneration() != gen {
				t.Fatalf("newest task is generation %d, want %d", p.Task().GetGeneration(), gen)
			}
			if !released && !invalidated && lastRun != gen {
				t.Fatalf("last run was generation %d, newest is %d", lastRun, gen)
			}
			if !released && lastRun != gen {
				// An invalidation kept the newest generation from running;
				// the repair's new generation must run.
				gen++
				s := p.onNewTask(genTask(gen, p.Task().GetRoot()))
				check("repair", s)
				if s.Run == nil {
					t.Fatalf("idle position does not run generation %d", gen)
				}
			}
		})
	}
}

// TestPositionRunsReportsWhatARunMeasured: a run that measured the link
// passes its transfer to the coordinator in its done report, which is
// how the coordinator's member learns B from positions on other members.
func TestPositionRunsReportsWhatARunMeasured(t *testing.T) {
	p := NewPositionRuns(genTask(1, false), coord)
	r1 := wantRun(t, p.onStart(), 1)
	s := p.onRunEnded(r1, RunEnd{Report: true, MeasuredBytes: 32 << 20, MeasuredNanos: int64(700 * time.Millisecond)}, false)
	if len(s.Sends) != 1 {
		t.Fatalf("sends %v, want one done report", s.Sends)
	}
	d, ok := s.Sends[0].Msg.(*messages.ReduceTaskDone)
	if !ok || d.GetMeasuredBytes() != 32<<20 || d.GetMeasuredNs() != int64(700*time.Millisecond) {
		t.Fatalf("report %v, want done with 32 MiB in 700ms", s.Sends[0].Msg)
	}
}

// A quiet position (a sliced AllReduce's chain link or relay) reports
// only what went wrong: its start and its end are silent when they
// succeed, a failed start or end is reported, and a position that is
// not quiet reports both.
func TestQuietPositionsReportOnlyFailures(t *testing.T) {
	quiet := func() *messages.ReduceTask {
		return &messages.ReduceTask{ReduceId: "r", Position: 3, Generation: 1, Sliced: true, Quiet: true}
	}
	p := NewPositionRuns(quiet(), coord)
	r := wantRun(t, p.onStart(), 1)
	wantSends(t, p.onRunStarted(r, nil, false))
	wantSends(t, p.onRunEnded(r, RunEnd{Report: true, MeasuredBytes: 4 << 20, MeasuredNanos: int64(80 * time.Millisecond)}, false))

	p = NewPositionRuns(quiet(), coord)
	r = wantRun(t, p.onStart(), 1)
	wantSends(t, p.onRunStarted(r, messages.Errorf(messages.ErrorCode_NOT_FOUND, "no source"), false), "started g1 err=true")
	p = NewPositionRuns(quiet(), coord)
	r = wantRun(t, p.onStart(), 1)
	wantSends(t, p.onRunStarted(r, nil, false))
	wantSends(t, p.onRunEnded(r, RunEnd{Report: true, Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "input gone")}, false), "done g1 err=true")

	loud := quiet()
	loud.Quiet = false
	p = NewPositionRuns(loud, coord)
	r = wantRun(t, p.onStart(), 1)
	wantSends(t, p.onRunStarted(r, nil, false), "started g1 err=false")
	wantSends(t, p.onRunEnded(r, RunEnd{Report: true}, false), "done g1 err=false")
}
