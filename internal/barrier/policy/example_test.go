package policy_test

import (
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
)

// A shell steps a barrier with an Enter on each BARRIER_REACHED message
// and with the Tick of the Decision's timer when its time comes.
func Example() {
	b, err := policy.New(policy.Options{
		MaxParticipants: 4,
		MinPercent:      50,               // early release once 2 of 4 entered...
		MinWait:         10 * time.Second, // ...but not before 10 s
		Timeout:         time.Minute,
		LateMode:        policy.PassThrough,
	})
	if err != nil {
		panic(err)
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	show := func(d policy.Decision) {
		next := "none"
		for _, t := range d.Timers { // the one timer: a Tick at the next deadline
			next = "+" + t.At.Sub(start).String()
		}
		fmt.Printf("fired=%v reason=%v release=%v next=%s\n", d.Fired, d.Reason, d.Release, next)
	}

	d := b.Step(start, policy.Enter{Label: "task-1", Host: "host-a"})
	show(d)
	d = b.Step(start.Add(2*time.Second), policy.Enter{Label: "task-2", Host: "host-b"})
	show(d)
	d = b.Step(d.Timers[0].At, d.Timers[0].Msg.(policy.Tick)) // the shell's timer fires at +10s
	show(d)
	d = b.Step(start.Add(12*time.Second), policy.Enter{Label: "task-3", Host: "host-c"})
	fmt.Println("late:", d.LateFire, "hosts:", len(b.Hosts()))
	// Output:
	// fired=false reason=not-fired release=[] next=+1m0s
	// fired=false reason=not-fired release=[] next=+10s
	// fired=true reason=percent release=[task-1 task-2] next=none
	// late: [task-3] hosts: 3
}
