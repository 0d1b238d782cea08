// Package policy is the pure decision logic of partial barriers (Albrecht et
// al., "Loose Synchronization for Large-Scale Networked Systems", USENIX 2006).
//
// Everything here follows the project rule "pure cores, thin actor shells":
// no goroutines, no clocks and no I/O. A Barrier keeps the one contract
// of the cores (outbox.Core): Step(now, event) takes the time as a value
// and one Event (Enter, Tick, Release, ForceFire, Veto) and returns a
// Decision, which embeds the outbox.Box whose timer asks for the next
// Tick and holds the refusal's error as a field. The same inputs always
// give the same outputs.
//
// The package has three parts:
//
//   - Knee: the on-line knee detector of the paper's section 4 (EWMA of the
//     arrival times and of their deviation, threshold arr + 4*arrvar).
//   - Barrier: the state machine of one partial barrier: early entry
//     (timeout, minimum percent, minimum wait, knee), throttled release,
//     semaphore barriers with holder timeouts, late arrivals (pass-through
//     or catch-up) and the entry-callback protocol.
//   - Adaptive: the adaptive concurrency controller of semaphore barriers
//     (median of recent holding times against the median of all).
//
// Time never goes backwards inside a core: an event whose now is earlier
// than the latest now already seen is treated as happening at that latest
// now. An event that is refused (Decision.Err) leaves the state unchanged.
package policy
