package barrier

import "time"

// Events published on the actor system's EventStream by barrier managers,
// next to those of package events.

// DeliveryFailed: a participant could not be served: it was gone when its
// release was due, or it held a semaphore too long (timed out) or failed
// while holding it. Published by the acting primary; the barrier's
// controller also gets a BarrierFailure message (the OnFailure callback).
type DeliveryFailed struct {
	Barrier string
	Label   string
	Host    string
	Reason  string
	Manager string // the manager that reported it
	At      time.Time
}

// TookOver: a backup manager became the acting primary of a barrier.
type TookOver struct {
	Barrier string
	Manager string
	Member  string // cluster member id of the new primary
	Epoch   uint64
	At      time.Time
}

// State: a barrier's numbers as a manager replica holds them, published
// by the acting primary after each step that changed one of them, and
// once more by a replica that stops acting (it stepped down, or the
// barrier closed). A live view shows the latest per barrier.
type State struct {
	Barrier string
	Manager string // the publishing manager
	Member  string // its cluster member
	Acting  bool   // the publisher is the acting primary
	Epoch   uint64
	// Kind is "barrier", "throttled" or "semaphore"; Max its
	// MaxParticipants.
	Kind string
	Max  int
	// Entered counts the distinct labels that entered, Passed those that
	// passed; Queued those waiting (for the fire, or for a semaphore's
	// slot); Throttled those the fire released that wait for their
	// throttled batch.
	Entered, Passed, Queued, Throttled int
	Fired                              bool
	Reason                             string // why it fired
	// Limit and Holders: a semaphore's concurrency level and its holders
	// now (0 otherwise).
	Limit, Holders int
	Replicas       []ReplicaState // in rank order
	Closed         bool
	At             time.Time
}

// ReplicaState is one replica of a barrier's manager: its member, and
// whether it acts as primary or its member was declared failed.
type ReplicaState struct {
	Member  string
	Primary bool
	Down    bool
}
