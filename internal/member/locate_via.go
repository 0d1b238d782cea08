package member

import (
	"context"
	"hash/maphash"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// A member's Locates through deputies: which deputy its Locate of a
// shard goes through, and the Locates that come to it as one
// (locate_deputy.go holds what a deputy does with them).

// deputyGroups is how many deputy groups this member's Locates use in a
// cluster of n members (MemberConfig.LocateDeputies): under 2, none.
func (m *Member) deputyGroups(n int) int {
	return directory.LocateDeputies(m.cfg.LocateDeputies, n)
}

// deputyFor is where this member's Locate of an object of shard goes
// through: the data address of its group's deputy for shard's member, or
// self (this member is that deputy), or neither (no deputies, or the
// deputy would be the shard's member).
func (m *Member) deputyFor(shard *actor.PID) (addr string, self bool) {
	stores := m.storeNodes()
	r := m.deputyGroups(len(stores))
	if r <= 1 || len(stores) <= 2 {
		return "", false
	}
	idx := m.peers.Load()
	if idx == nil {
		return "", false
	}
	home := idx.byAddr[shard.GetAddress()]
	at, found := slices.BinarySearchFunc(stores, home, func(s *messages.NodeRef, id string) int { return strings.Compare(s.GetNodeId(), id) })
	if !found {
		return "", false
	}
	d := stores[(at+1+int(m.deputyGroup%uint64(r)))%len(stores)]
	switch d.GetNodeId() {
	case home:
		return "", false
	case m.id:
		return "", true
	}
	return d.GetDataAddress(), false
}

// deputyGroupOf is member id's deputy group before it is taken modulo
// the groups: a hash of its id.
func deputyGroupOf(id string) uint64 { return maphash.String(deputySeed, id) }

var deputySeed = maphash.MakeSeed()

// serveLocateVia takes a receiver's Locate that came to this member as its
// Locate deputy (messages.ControlLocateVia): answered here if the
// object's shard is on this member, else sent on to the shard's member.
// A shard whose member this member does not know is UNAVAILABLE: the
// receiver then asks the shard straight.
func (m *Member) serveLocateVia(ctx context.Context, req []byte) ([]byte, error) {
	var l messages.Locate
	if err := proto.Unmarshal(req, &l); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed Locate on the data plane: %v", err)
	}
	id := l.GetObjectId()
	if id == "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "Locate without an object id")
	}
	if _, ok := ctx.Deadline(); !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "Locate without a deadline")
	}
	pid := m.shardFor(id)
	if pid.GetAddress() == m.system.Address() {
		return shardactor.ServeLocate(ctx, m.system.Root, m.shardFor, req)
	}
	addr := m.locateAt(pid)
	if addr == "" {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s does not know the member of %q's shard", m.id, id)
	}
	r, err := m.deputy.Locate(ctx, addr, &l)
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(r)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode LocateReply: %v", err)
	}
	return b, nil
}
