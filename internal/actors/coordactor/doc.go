// Package coordactor holds the Coordinator actor: one per Reduce, a child
// of the directory shard that owns the target. It is the shell around the
// pure reduction.Reduction (package github.com/hoplite-go/hoplite/internal/reduction):
// messages and timers become steps, and a step's outbox becomes sends,
// watches, timers and events.
package coordactor
