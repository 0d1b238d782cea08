package barrieractor

import "github.com/hoplite-go/hoplite/events"

// The events the barrier managers publish on the actor system's
// EventStream are package events' (public, since applications and the
// live view watch them); the managers name them by these shorter names.
type (
	DeliveryFailed = events.BarrierDeliveryFailed
	TookOver       = events.BarrierTookOver
	State          = events.BarrierState
	ReplicaState   = events.BarrierReplicaState
)
