package member

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
)

// membership is an in-process membership service: the embedded cluster's
// stand-in for an etcd server. Each member registers
// through its own provider (Provider) and every registered provider is
// told the whole topology whenever it changes, in the order the changes
// happened. It holds no liveness logic of its own: a member is in it from
// its start until it leaves or is killed, like an etcd lease that the
// kernel revokes with the process.
type membership struct {
	mu      sync.Mutex // guards members and watchers; held while notifying, so that changes arrive in order
	members map[string]*pcluster.Member
	watch   map[*membershipProvider]bool
}

// newMembership returns an empty in-process membership service.
func newMembership() *membership {
	return &membership{members: map[string]*pcluster.Member{}, watch: map[*membershipProvider]bool{}}
}

// provider returns a Proto.Actor cluster provider that registers one
// member with this service.
func (s *membership) provider() pcluster.ClusterProvider { return &membershipProvider{svc: s} }

// Remove takes a member out of the topology without its provider's
// help: what the service does when the member's process dies.
func (s *membership) Remove(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.members[id]; !ok {
		return
	}
	delete(s.members, id)
	for p := range s.watch {
		if p.id == id {
			delete(s.watch, p)
		}
	}
	s.notifyLocked()
}

// IDs lists the registered members, sorted.
func (s *membership) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.members))
	for id := range s.members {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func (s *membership) notifyLocked() {
	members := make([]*pcluster.Member, 0, len(s.members))
	for _, m := range s.members {
		members = append(members, m)
	}
	slices.SortFunc(members, func(a, b *pcluster.Member) int { return strings.Compare(a.Id, b.Id) })
	for p := range s.watch {
		// Each member list gets its own copies: it keeps them.
		own := make([]*pcluster.Member, len(members))
		for i, m := range members {
			own[i] = &pcluster.Member{Id: m.Id, Host: m.Host, Port: m.Port, Kinds: slices.Clone(m.Kinds)}
		}
		p.list.UpdateClusterTopology(own)
	}
}

// membershipProvider is one member's registration with a Membership.
type membershipProvider struct {
	svc  *membership
	id   string
	list *pcluster.MemberList
}

func (p *membershipProvider) StartMember(c *pcluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("in-process membership: %w", err)
	}
	p.id, p.list = c.ActorSystem.ID, c.MemberList
	s := p.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members[p.id] = &pcluster.Member{Id: p.id, Host: host, Port: int32(port), Kinds: c.GetClusterKinds()}
	s.watch[p] = true
	s.notifyLocked()
	return nil
}

func (p *membershipProvider) StartClient(c *pcluster.Cluster) error {
	p.list = c.MemberList
	s := p.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watch[p] = true
	s.notifyLocked()
	return nil
}

func (p *membershipProvider) Shutdown(bool) error {
	s := p.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watch, p)
	if p.id != "" {
		if _, ok := s.members[p.id]; ok {
			delete(s.members, p.id)
			s.notifyLocked()
		}
	}
	return nil
}
