package policy_test

import (
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
)

// A shell drives a barrier with Enter on each BARRIER_REACHED message and
// with Tick whenever the timer it set from Decision.Next goes off.
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
		if !d.Next.IsZero() {
			next = "+" + d.Next.Sub(start).String()
		}
		fmt.Printf("fired=%v reason=%v release=%v next=%s\n", d.Fired, d.Reason, d.Release, next)
	}

	d, _ := b.Enter(start, "task-1", "host-a")
	show(d)
	d, _ = b.Enter(start.Add(2*time.Second), "task-2", "host-b")
	show(d)
	d = b.Tick(d.Next) // the shell's timer fires at +10s
	show(d)
	d, _ = b.Enter(start.Add(12*time.Second), "task-3", "host-c")
	fmt.Println("late:", d.LateFire, "hosts:", len(b.Hosts()))
	// Output:
	// fired=false reason=not-fired release=[] next=+1m0s
	// fired=false reason=not-fired release=[] next=+10s
	// fired=true reason=percent release=[task-1 task-2] next=none
	// late: [task-3] hosts: 3
}
