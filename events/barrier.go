package events

import "time"

// The events the managers of package barrier's barriers publish: each
// barrier is managed by replicated actors on the members.

// BarrierDeliveryFailed: a participant could not be served: it was gone
// when its release was due, or it held a semaphore too long (timed out)
// or failed while holding it. Published by the acting primary; the
// barrier's controller also hears of it (barrier.OnFailure's callback).
type BarrierDeliveryFailed struct {
	Barrier string
	Label   string
	Host    string
	Reason  string
	Manager string // the manager that reported it, "<member id>/<actor>"
	At      time.Time
}

// BarrierTookOver: a backup manager became the acting primary of a
// barrier.
type BarrierTookOver struct {
	Barrier string
	Manager string // "<member id>/<actor>"
	Member  string // cluster member id of the new primary
	Epoch   uint64
	At      time.Time
}

// BarrierState: a barrier's numbers as a manager replica holds them,
// published by the acting primary after each step that changed one of
// them, and once more by a replica that stops acting (it stepped down, or
// the barrier closed). A live view shows the latest per barrier.
type BarrierState struct {
	Barrier string
	Manager string // the publishing manager, "<member id>/<actor>"
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
	Replicas       []BarrierReplicaState // in rank order
	Closed         bool
	At             time.Time
}

// BarrierReplicaState is one replica of a barrier's manager: its member,
// and whether it acts as primary or its member was declared failed.
type BarrierReplicaState struct {
	Member  string
	Primary bool
	Down    bool
}
