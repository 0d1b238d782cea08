// Package replica is the pure core of one partial barrier's manager
// replica: a policy.Barrier plus the primary/backup replication of the
// partial-barriers paper (section 3.3), with the rules for barrier names,
// labels and options. No goroutines, no clocks, no I/O: time comes in as a
// value and every step returns Effects for the manager actor
// (internal/actors/barrieractor) to carry out. Participants are named by their
// actor.PID, used only as an opaque, comparable address.
package replica
