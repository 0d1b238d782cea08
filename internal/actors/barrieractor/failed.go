package barrieractor

import "sync"

// MemberFailed tells a node's barrier host that the cluster declared a
// member incarnation failed: the member's failure notice was delivered
// here and its member view accepted it (the member is out of placement,
// and expelled if it still lives). The host passes it on to its
// managers: a replica on that member never acknowledges a close, and a
// Close must not wait for it. Only the member's own failure path sends
// it, never the network.
type MemberFailed struct {
	Member  string
	Address string // the incarnation's actor system address
}

// failedMembers is the set of member incarnations this node heard
// declared failed, the last limit of them. It is shared by a host's
// incarnations and read by managers as they start, so that a manager
// that starts (or restarts) after a failure knows of it too; hence the
// lock.
type failedMembers struct {
	mu    sync.Mutex
	set   map[MemberFailed]bool
	order []MemberFailed
	limit int
}

func newFailedMembers(limit int) *failedMembers {
	return &failedMembers{set: map[MemberFailed]bool{}, limit: limit}
}

// add records m; it reports whether it was new.
func (f *failedMembers) add(m MemberFailed) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.set[m] {
		return false
	}
	if len(f.order) >= f.limit {
		delete(f.set, f.order[0])
		f.order = f.order[1:]
	}
	f.set[m] = true
	f.order = append(f.order, m)
	return true
}

// has reports whether member, at address, was declared failed.
func (f *failedMembers) has(member, address string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set[MemberFailed{Member: member, Address: address}]
}
