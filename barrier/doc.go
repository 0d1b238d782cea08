// Package barrier is the Go API of Hoplite's partial barriers (Albrecht et
// al., "Loose Synchronization for Large-Scale Networked Systems", USENIX
// 2006), on an embedded cluster (*cluster.Local) or anything that names
// its nodes' barrier hosts.
//
// A controller creates a barrier, participants open it and enter it with a
// label (a host, or a logical task):
//
//	b, err := barrier.New(ctx, l, "map-phase", barrier.Max(8),
//		barrier.Timeout(time.Minute),                           // fire a minute after the first entry,
//		barrier.MinPercent(75), barrier.MinWait(5*time.Second)) // or at 75% after 5s
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer b.Close(ctx)
//	p, err := barrier.Open(ctx, l, "map-phase", barrier.Host("node-3"))
//	if err != nil {
//		log.Fatal(err)
//	}
//	pass, err := p.Enter(ctx, "task-17") // blocks until the barrier fires
//	if errors.Is(err, barrier.ErrCatchUp) {
//		// arrived after the fire (with the CatchUp option)
//	} else if err != nil {
//		log.Fatal(err)
//	}
//	defer pass.Release(ctx) // semaphore barriers: let the next one in
//
// Options mirror the paper: Max, Timeout, MinPercent, MinWait, FireOnKnee,
// an entry callback that can veto or force the fire (OnEnter, with its own
// timeout), pass-through or CatchUp for late arrivals, Throttle for
// throttled release, Semaphore (+HolderTimeout, Adaptive) for semaphore
// barriers whose holders leave with Pass.Release, OnFailure for
// participants the manager could not serve, and Replicas/TakeoverAfter for
// the replicated manager. Status and Hosts say who passed.
//
// Every call waits at most until its context's deadline (DefaultWait when
// the context has none) and fails with typed errors: errors.Is against
// messages.ErrInvalidArgument (bad options, label or name),
// messages.ErrNotFound (unknown barrier), messages.ErrDeleted (closed
// barrier), messages.ErrConflict (duplicate label, other options),
// messages.ErrCapacity (more labels than Max), messages.ErrTimeout.
//
// The managers are actors (internal to the module, like the rest of the
// machinery) under each node's supervisor: the barrier's name hashes to a home node, and the manager
// there and on the next live nodes form an ordered replica list. A handle
// sends every message to every replica and ignores duplicate answers, so
// a primary's failure costs a takeover delay, not the barrier; a label's
// first Enter goes up a tree of the members instead, which combines the
// arrivals for the replicas and brings the outcomes back down, and a
// waiting Enter, Release or Status asks the replicas again every second. A handle's
// own actor (its participant) does that matching.
package barrier
