// Package tree is the pure core of a barrier's combining tree: the
// arrivals of a barrier's participants are combined up a k-ary tree of
// members, rooted at the member of the barrier's acting primary, and its
// outcomes travel down the same tree, so that no member takes more than
// a few messages per barrier and an arrival reaches the manager in
// ⌈log_k N⌉ hops.
//
// Shape is the tree over an ordered member list; Node is one member's
// position in it, stepped by events (a local Enter, a child's
// BarrierArrivals, the parent's BarrierReleases, the root's Release, a
// Flush timer) that return an Output: the messages to send (to member
// names), the timer to arm, and, at the root, the arrivals for the
// barrier's policy; at every position, the outcomes of the participants
// that entered there.
//
// What a position may hold back is the policy's to say (ModeFor): a
// traditional barrier fires only when all have entered, so a position
// holds its subtree's arrivals until every one it expects is in and
// sends them as one message (Hold); a barrier that may fire early (a
// timeout, a percent, a knee, an entry callback), that releases at a
// throttled pace or admits to a semaphore decides on each arrival's time
// and order, so every position forwards what it has at once (AtOnce):
// one message per step, still combined with whatever reached it in that
// step, or (Config.Coalesce) with whatever reached it before a Flush due
// at the same instant, which an actor shell delivers behind its mailbox:
// a member that cannot know how many will enter there passes on what
// came together. No goroutines, no clocks, no I/O: time comes in as a
// value.
package tree
