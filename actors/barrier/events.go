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
