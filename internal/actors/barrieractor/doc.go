// Package barrieractor is the actor side of partial barriers: the per-node
// barrier Host (a child of each node supervisor), one Manager per
// barrier name and replica, a thin shell around replica.Replica, and the
// participant actor behind each application handle (package barrier).
// A host is also the member's position in each barrier's combining tree
// (host_tree.go, a shell around tree.Node), and the primary of rank 0
// sends the outcomes of labels that came up the tree back down it
// (manager_tree.go).
//
// replica.Replica is the pure core of one manager replica (no goroutines, no
// clocks, no I/O; time comes in as a value). It owns a policy.Barrier —
// the state machine of the barrier itself — and adds the replication of
// the paper's section 3.3:
//
//   - Every barrier has an ordered list of replicas: the node its name
//     hashes to and the next live nodes (chosen by the creator). Clients
//     send every message to every replica; only the acting primary
//     answers.
//   - The primary applies each operation (enter, release, tick, forced
//     fire, veto, close) to its policy.Barrier at its own time, appends it
//     to a log and forwards it (BarrierReplicate) before it tells the
//     participants. Backups replay the op on their own policy.Barrier: the
//     policy is deterministic, so they hold the same state. A backup keeps
//     the client operations it heard directly until the primary's forward
//     confirms them.
//   - A backup that hears clients but not the primary for replica.TakeoverAfter
//     (times its distance from the primary in the rank order), or whose
//     copy says a deadline passed replica.TakeoverAfter ago without news from the
//     primary, takes over: it raises the epoch, sends the whole log to the
//     other replicas, applies the client operations the old primary never
//     confirmed, re-sends every outcome already decided (clients ignore
//     duplicates), and acts on deadlines that passed. A replica that hears
//     a higher epoch (or the same epoch from a lower rank) steps down and
//     adopts that primary's log, and hands that primary what its own
//     state had applied and the adopted one lacks (BarrierHandover), which
//     the primary applies as client operations: a backup that took over
//     from a primary that was only slow may not have heard everything the
//     primary decided and told its participants.
//
// Quiet ticks and vetoes (an entry callback re-asked every
// CallbackTimeout) are compacted so the log stays within a few entries
// per participant.
package barrieractor
