package member

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/revokeactor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// Failure detection across processes. Three signals feed one path:
//
//   - a data connection to a member's data plane fails (the transport
//     wrapper below sees the error on the receiving side at once: a killed
//     process's sockets are closed by the kernel);
//   - Proto.Actor remote terminates the endpoint of a member's address (its
//     gRPC stream broke);
//   - the cluster topology drops a member (the provider no longer sees it;
//     handled by the members actor, which originates directly).
//
// The first two are suspicions: this member probes the suspect's actor
// system port, and only a refused connection (nothing listens there any
// more: the process is gone) confirms the failure. A confirmed failure
// goes to the members actor, which hands it to the revoke broadcaster
// unless the member announced a leave (memberGone); the broadcaster
// floods a notice over the BMG overlay, and every member delivers it
// once (deliver, below). While the whole cluster stops (quiesce), none
// of it runs: members that stop together have not failed.

func (m *Member) suspect(s suspicion) {
	if s.at.IsZero() {
		s.at = time.Now()
	}
	select {
	case m.suspects <- s:
	default: // a burst: the ones queued already cover it
	}
}

func (m *Member) suspectData(dataAddr string, err error) {
	m.suspect(suspicion{dataAddress: dataAddr, why: "data connection: " + err.Error()})
}

type probeResult struct {
	id, address string
	s           suspicion
	dead        bool
	err         error
}

// detect confirms suspicions, one probe per member at a time.
func (m *Member) detect() {
	probing := map[string]bool{}
	results := make(chan probeResult)
	for {
		select {
		case <-m.quit:
			return
		case s := <-m.suspects:
			idx := m.peers.Load()
			if idx == nil {
				continue
			}
			id := idx.byAddr[s.address]
			if s.dataAddress != "" {
				id = idx.byData[s.dataAddress]
			}
			addr := idx.byID[id]
			if id == "" || id == m.id || addr == "" || probing[id] {
				continue // not a member we know alive (or already being probed)
			}
			probing[id] = true
			go func() {
				if d := m.cfg.hooks.ProbeDelay; d > 0 {
					select {
					case <-time.After(d):
					case <-m.quit:
						return
					}
				}
				// A process being killed may still accept connections for a
				// moment after its data connections broke: look twice more.
				dead, err := probe(addr)
				for _, wait := range []time.Duration{30 * time.Millisecond, 120 * time.Millisecond} {
					if dead {
						break
					}
					select {
					case <-time.After(wait):
					case <-m.quit:
						return
					}
					dead, err = probe(addr)
				}
				select {
				case results <- probeResult{id: id, address: addr, s: s, dead: dead, err: err}:
				case <-m.quit:
				}
			}()
		case r := <-results:
			delete(probing, r.id)
			if m.closing.Load() {
				continue
			}
			entry := m.log.WithFields(logrus.Fields{"suspect": r.id, "signal": r.s.why})
			if !r.dead {
				entry.WithError(r.err).Debug("suspected member is still reachable")
				if r.s.address != "" {
					// Its remote endpoint terminated while it lives: Proto.Actor
					// told every local watcher of its actors that they
					// terminated, so our shards dropped its copies. It
					// republishes them (and the shards watch it again).
					m.resync(r.id)
				}
				continue
			}
			// The members actor decides: a member that announced its leave
			// and is gone now left; any other failed.
			if pid := m.membersPID.Load(); pid != nil {
				m.system.Root.Send(pid, &memberGone{id: r.id, address: r.address, signal: r.s.why,
					confirmedIn: time.Since(r.s.at).Round(time.Microsecond)})
			}
		}
	}
}

// ErrExpelled is why a member stops by itself: the others declared it
// failed while it was alive (paused, or cut off, longer than the health
// checks allow). That incarnation cannot come back: `hoplite node` rejoins
// as a new one by itself; a program that embeds a Member Joins again.
var ErrExpelled = errors.New("hoplite: the other members declared this member failed")

// expelled runs after the provider dropped member id (at addr) from the
// topology and its failure was spread: if the member is in fact alive, it
// is told directly (the broadcast sends no copy to its subject), so that
// it rejoins as a new incarnation instead of serving on outside the
// placement.
//
// The notice is repeated until that incarnation no longer answers at
// addr (nothing listens, or another member id answers there), for at most
// expelNoticeFor: one notice is not enough. The member is usually paused
// when it is dropped (that is why it missed its health checks), and the
// Proto.Actor endpoint that carries the notice connects to it only when
// it resumes; that one connection attempt can fail (the endpoint is
// dropped with what it holds), and a member that never heard of its
// expulsion served on outside every other member's view for good
// (TestProcessExpelledRejoins under load: "views did not converge", the
// member logging only "membership views disagree").
//
// The notice goes to that incarnation's broadcaster (root is its node
// supervisor, "" if no handshake with it was over here: the first answer
// to a hello at addr that names id tells it), which a later incarnation
// at addr does not have.
func (m *Member) expelled(id, addr, root string) {
	end := time.Now().Add(expelNoticeFor)
	for told := 0; ; told++ {
		dead, err := probe(addr)
		if dead {
			return
		}
		if told == 0 {
			m.log.WithFields(logrus.Fields{"member": id, "probe": fmt.Sprint(err)}).
				Info("a member the provider dropped still answers: telling it to rejoin as a new incarnation")
		}
		if root != "" {
			// The wave's notice (revoke.FailureNotice), not another one
			// with epoch 0: one failure of one incarnation has one id.
			m.system.Root.Send(memberPID(addr, root, revokeName),
				&messages.RevokeNotice{Origin: m.id, Subject: id, From: m.id, SubjectAddress: addr, Epoch: revoke.IncarnationEpoch(addr)})
			if m.cfg.embedded != nil {
				return // once only: embedded members never pause
			}
		}
		// Who answers there now? A hello without a member id: the
		// answer's view is all it asks for, nothing is recorded there.
		res, err := m.system.Root.RequestFuture(HelloPID(addr),
			&messages.MemberHello{ProtocolVersion: m.cfg.version, Shards: int32(m.cfg.Shards)}, expelNoticeEvery).Result()
		if r, ok := res.(*messages.MemberHelloReply); err == nil && ok {
			if r.GetMemberId() != id {
				return // it stopped, and a new incarnation serves there
			}
			if root == "" && RootOf(r.GetStore()) != "" {
				root = RootOf(r.GetStore())
				continue // tell it now
			}
		}
		if time.Now().After(end) {
			m.log.WithFields(logrus.Fields{"member": id, "notices": told + 1}).
				Warn("a member the provider dropped still answers after being told to rejoin: giving up telling it")
			return
		}
		select {
		case <-m.quit:
			return
		case <-time.After(expelNoticeEvery):
		}
	}
}

const (
	// expelNoticeEvery is how often a member that was dropped while it
	// answers is told again, and how long each check waits for its answer.
	expelNoticeEvery = time.Second
	// expelNoticeFor bounds the telling: longer than a pause the health
	// checks did not tolerate is likely to last.
	expelNoticeFor = time.Minute
)

// resync asks member id's store node to republish what it holds to the
// shards hosted here.
func (m *Member) resync(id string) {
	store := m.peerPID(id, storeName)
	if store == nil {
		return
	}
	var shards []int32
	for j, pid := range *m.table.Load() {
		if pid.GetAddress() == m.system.Address() {
			shards = append(shards, int32(j))
		}
	}
	if len(shards) > 0 {
		m.system.Root.Send(store, &messages.Republish{Shards: shards, ShardCount: int32(m.cfg.Shards)})
	}
}

// probe reports whether nothing listens at addr any more. A refused
// connection is conclusive; a timeout is not (the member may be slow, and
// the provider's health checks decide then).
func probe(addr string) (dead bool, err error) {
	c, err := net.DialTimeout("tcp", addr, 250*time.Millisecond)
	if err == nil {
		_ = c.Close()
		return false, nil
	}
	return errors.Is(err, syscall.ECONNREFUSED), err
}

// admitNotice refuses a failure notice whose subject this member knows
// at another address: it is about a member of another cluster (or an
// incarnation long gone) and reached this member because it now holds an
// address that member's peers still sent to. Embedded clusters name their
// members node-0, node-1, … in every process, so on a machine running
// several of them (tests in parallel) such a late notice would otherwise
// expel a live member of the wrong cluster.
//
// The subject's address is looked up among the peers this member uses
// and, failing that, in the provider's topology: at a member's start no
// handshake is over yet, so no peer is in use, while the topology
// already names them (a notice admitted then, when only the peer index
// was asked, marked node-1 dead at a starting node-0 of another test
// binary's cluster: "the members did not converge ... node-1 dead true").
// A subject this member knows nowhere is admitted: it may be a member
// the topology dropped already, whose failure must still be delivered.
func (m *Member) admitNotice(n *messages.RevokeNotice) bool {
	addr := n.GetSubjectAddress()
	if addr == "" {
		return true
	}
	known := ""
	if n.GetSubject() == m.id {
		known = m.system.Address()
	} else if idx := m.peers.Load(); idx != nil {
		known = idx.byID[n.GetSubject()]
	}
	if known == "" {
		known = m.topologyAddress(n.GetSubject())
	}
	if known == "" || known == addr {
		return true
	}
	m.log.WithFields(logrus.Fields{"subject": n.GetSubject(), "subject_address": addr, "known_address": known,
		"from": n.GetFrom(), "origin": n.GetOrigin()}).
		Info("ignored a failure notice about a member at another address (a late message for another cluster or incarnation)")
	return false
}

// topologyAddress is the address at which the provider's current
// topology lists member id ("" if it does not).
func (m *Member) topologyAddress(id string) string {
	if t := m.topo.Load(); t != nil {
		for _, mem := range t.GetMembers() {
			if mem.GetId() == id {
				return mem.Address()
			}
		}
	}
	return ""
}

// deliver runs once per failure notice at this member (in the revoke
// actor, after the notice was forwarded).
func (m *Member) deliver(ctx actor.Context, d revokeactor.Delivery) {
	if m.closing.Load() {
		return // the whole cluster stops: nobody failed
	}
	id, addr := d.Notice.Subject, d.Notice.SubjectAddress
	// Once per failure and member, whichever path published the failure
	// first: who originated the notice and who handed it here is what
	// shows the overlay at work ("from" is empty at the origin).
	m.log.WithFields(logrus.Fields{"failed": id, "origin": d.Notice.Origin, "from": d.From}).Info("failure notice delivered")
	if id == m.id {
		m.fail(fmt.Errorf("%w (notice from %s)", ErrExpelled, d.Notice.Origin))
		return
	}
	// Before the members actor hears of it: once it has, the index no
	// longer names the failed member's store.
	store := (*m.peers.Load()).storeOf[id]
	// Out of placement and of the overlay at once: its shards move.
	if pid := m.membersPID.Load(); pid != nil {
		ctx.Send(pid, &memberFailed{id: id, address: d.Notice.SubjectAddress, origin: d.Notice.Origin, from: d.From})
	}
	if addr == "" {
		addr, _, _ = strings.Cut(id, "#")
	}
	// Not when a new incarnation lives at that address by now, and not
	// when the notice is about this member's own predecessor (a restarted
	// member hears of it from the others): those actors are alive.
	if addr != m.system.Address() && !m.addressReused(addr, id) {
		// Everything here that watches the member's actors hears of it now:
		// store nodes (a fetch's sender or shard), reduce coordinators (tree
		// repair), directory shards; as Proto.Actor does for a member the
		// topology dropped.
		ctx.ActorSystem().EventStream.Publish(&remote.EndpointTerminatedEvent{Address: addr})
		// And the local shards drop its copies and parked requests even if
		// they never watched it through this endpoint (they know its
		// store by its incarnation's PID).
		if store != nil && store.GetAddress() == addr {
			for _, pid := range m.localShards() {
				ctx.Send(pid, &actor.Terminated{Who: store.PID(), Why: actor.TerminatedReason_AddressTerminated})
			}
		}
	}
	// events.NodeFailed is published by the members actor, once its view
	// accepted the notice (memberFailed): a notice about a name this
	// member never knew, or about the name at another address, is not
	// about one of its members.
}

// addressReused reports whether another incarnation now lives at addr (a
// late notice about the old one must not touch the new one's actors).
func (m *Member) addressReused(addr, id string) bool {
	if other := (*m.peers.Load()).byAddr[addr]; other != "" && other != id {
		return true
	}
	if t := m.topo.Load(); t != nil {
		for _, mem := range t.GetMembers() {
			if mem.Address() == addr && mem.GetId() != id {
				return true
			}
		}
	}
	return false
}

func (m *Member) localShards() []*actor.PID {
	var out []*actor.PID
	self := m.system.Address()
	for _, pid := range *m.table.Load() {
		if pid.GetAddress() == self {
			out = append(out, pid)
		}
	}
	return out
}

// watchedTransport reports data-plane connection failures (a peer that is
// gone) to the failure detector. Cancellations, deadlines and errors the
// peer answered with are not failures.
type watchedTransport struct {
	transport.Transport
	report  func(dataAddr string, err error)
	metrics *memberMetrics
	peerOf  func(dataAddr string) string
	// down, if set, reports that this member crashed: it opens nothing
	// and calls nobody any more (see errCrashed).
	down func() bool
}

// errCrashed is what a crashed member's data plane answers its own
// actors, which run on for a moment while they are stopped: a SIGKILLed
// process sends nothing more, and an embedded member killed by Local.Kill
// must not either. One that still could sent a Locate to another
// member's shard after every member had delivered its failure, and the
// shard recorded the dead member as a partial copy and handed it to the
// next receiver as its sender (TestFigure4BroadcastFailover: R3 fetched
// from the killed R1 first, a second SenderSwitched).
var errCrashed = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "this member has crashed")

func (w *watchedTransport) crashed() bool { return w.down != nil && w.down() }

func (w *watchedTransport) check(addr string, err error) {
	if errors.Is(err, messages.ErrUnavailable) {
		w.report(addr, err)
	}
}

func (w *watchedTransport) Open(ctx context.Context, self, addr, id string, offset int64, chunk int) (transport.Stream, error) {
	if w.crashed() {
		return nil, errCrashed
	}
	s, err := w.Transport.Open(ctx, self, addr, id, offset, chunk)
	return w.watch(addr, s, err)
}

// OpenPaced implements transport.PacedOpener, pacing where the wrapped
// transport can.
func (w *watchedTransport) OpenPaced(ctx context.Context, self, addr, id string, offset int64, chunk int) (transport.Stream, error) {
	if w.crashed() {
		return nil, errCrashed
	}
	s, err := transport.OpenPaced(ctx, w.Transport, self, addr, id, offset, chunk)
	return w.watch(addr, s, err)
}

// watch wraps an opened stream (or reports its failure to open).
func (w *watchedTransport) watch(addr string, s transport.Stream, err error) (transport.Stream, error) {
	if err != nil {
		w.check(addr, err)
		return nil, err
	}
	w.metrics.fetches.Inc()
	return &watchedStream{Stream: s, addr: addr, w: w, start: time.Now(),
		received: w.metrics.received.WithLabelValues(w.peerOf(addr))}, nil
}

// Call makes a control request on the data plane: a peer that could not be reached is
// suspected, as for a stream; one that answered with an error is alive.
func (w *watchedTransport) Call(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
	if w.crashed() {
		return nil, errCrashed
	}
	b, err := w.Transport.Call(ctx, addr, kind, req)
	if err != nil && !transport.Answered(err) {
		w.check(addr, err)
	}
	return b, err
}

type watchedStream struct {
	transport.Stream
	addr     string
	w        *watchedTransport
	start    time.Time
	received prometheus.Counter
}

func (s *watchedStream) Next(ctx context.Context) ([]byte, error) {
	b, err := s.Stream.Next(ctx)
	s.observe(len(b), err)
	return b, err
}

// observe counts n received bytes and reports a stream's end or failure.
func (s *watchedStream) observe(n int, err error) {
	s.received.Add(float64(n))
	switch {
	case err == io.EOF:
		s.w.metrics.fetchSeconds.Observe(time.Since(s.start).Seconds())
	case err != nil:
		s.w.check(s.addr, err)
	}
}

// NextInto keeps the receive-into-the-object path of the transport: a
// wrapper whose NextInto went through Next made every fetched byte take
// one more copy (a fifth of a 32 MiB broadcast's CPU).
func (s *watchedStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	n, err := s.Stream.NextInto(ctx, dst)
	s.observe(n, err)
	return n, err
}

// peerByData names the member serving a data address (the address itself
// if it is not a member this member knows).
func (m *Member) peerByData(addr string) string {
	if idx := m.peers.Load(); idx != nil {
		if id := idx.byData[addr]; id != "" {
			return id
		}
	}
	return addr
}

// membersAt is how many members this member can reach at the host ip
// (its view's addresses; the manage port's bound per source grows with
// it).
func (m *Member) membersAt(ip netip.Addr) int {
	idx := m.peers.Load()
	if idx == nil {
		return 0
	}
	n := 0
	for addr := range idx.byAddr {
		if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Unmap() == ip {
			n++
		}
	}
	return n
}

// forgetDataPeers closes the pooled data-plane connections to the
// members that were reachable in old and are not in now (failed, left or
// expelled): nothing would use them again, and each held a descriptor
// and a slot at its peer's address until the idle reaper found it.
func (m *Member) forgetDataPeers(old, now *peerIndex) {
	f, ok := m.data.(interface{ ForgetPeer(addr string) })
	if !ok || old == nil {
		return
	}
	for d := range old.byData {
		if _, still := now.byData[d]; !still {
			f.ForgetPeer(d)
		}
	}
}

// ---- graceful leave ----

// leave takes this member out of the cluster while it still serves: the
// others move its shards (and their rebuilds read its store), then every
// complete copy it holds is given up to the directory, which says for
// each whether it was the last. It returns the objects lost: those only
// this member held. A member with no live peer hands nothing off (nobody
// would take it, and its shards stop with it): every object it holds is
// lost, and counted so without asking anyone.
func (m *Member) leave(ctx context.Context) ([]string, error) {
	members := m.membersPID.Load()
	if members == nil {
		return nil, errNotRunning
	}
	if !m.hasLivePeer() {
		lost := m.heldObjects()
		entry := m.log.WithField("lost_objects", len(lost))
		if len(lost) > 0 {
			entry.WithField("objects", sample(lost, 10)).Warn("leaving with no other member: the objects held here are lost")
		}
		entry.Info("member leaving the cluster")
		return lost, nil
	}
	// 1. Everyone takes us out of placement: our shards move while our
	// store still answers the new owners' republish requests.
	// Each member is asked until it answers, within the leave's
	// deadline: one that has not heard of the leave when our connection
	// closes takes it for a failure and spreads a notice (a fixed 2 s wait
	// ran out on a loaded machine, and a survivor did so). A member that
	// dies meanwhile fails its request at once (it is watched), and one
	// that never answers sees us leave the topology.
	idx := *m.peers.Load()
	var asked sync.WaitGroup
	for id := range idx.byID {
		pid := m.peerPID(id, membersName)
		if pid == nil {
			continue
		}
		asked.Add(1)
		go func() {
			defer asked.Done()
			_, err := actorutil.RequestEvery(ctx, m.system.Root, pid, &messages.MemberLeaving{MemberId: m.id}, time.Second)
			if err != nil {
				m.log.WithError(err).WithField("member", id).Info("leave: a member did not confirm the leave; it sees this member leave the topology")
			}
		}()
	}
	asked.Wait()
	if _, err := actorutil.Request(ctx, m.system.Root, members, leaveSelf{}); err != nil {
		return nil, err
	}
	// 2. Every complete copy we hold is given up to the directory; those
	// no other member holds are lost: the shard marks them so, and Gets of
	// them fail at once with LOST instead of waiting. Logged, and returned.
	var lost []string
	for _, id := range m.heldObjects() {
		gone, err := m.reportLost(ctx, id)
		if err != nil {
			m.log.WithError(err).WithField("object", id).Warn("leave: could not give up a copy")
			continue
		}
		if gone {
			lost = append(lost, id)
			m.log.WithField("object", id).Warn("object lost: this member held its only copy")
		}
	}
	m.log.WithField("lost_objects", len(lost)).Info("member leaving the cluster")
	return lost, nil
}

// hasLivePeer reports whether another member is in this member's
// placement (one that is itself leaving is not).
func (m *Member) hasLivePeer() bool {
	if live := m.live.Load(); live != nil {
		for _, id := range *live {
			if id != m.id {
				return true
			}
		}
	}
	return false
}

// heldObjects lists the objects of which this member holds a complete
// copy that the directory knows (reduce intermediates are not in it).
func (m *Member) heldObjects() []string {
	var out []string
	for _, o := range m.store.Objects() {
		id := o.ID()
		if strings.HasPrefix(id, directory.InternalPrefix) {
			continue
		}
		if _, done, err := o.Progress(); !done || err != nil {
			continue
		}
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// sample is at most n of ids, for a log line.
func sample(ids []string, n int) []string {
	if len(ids) <= n {
		return ids
	}
	return append(slices.Clip(ids[:n]), fmt.Sprintf("(%d more)", len(ids)-n))
}

// reportLost gives up this member's copy of id and says whether it was
// the last. The shard may have just moved: it answers UNAVAILABLE until
// every store node has republished to it (only then can it tell whether
// a copy is the last), or does not run yet; those are retried until the
// leave's deadline, which a loaded machine needs (a fixed 20 tries, about
// a second, gave up on an object under the full test suite). NOT_FOUND
// (the shard does not know this member's copy) is retried a while.
//
// Each ask waits longer than the one before that timed out (1 s doubling
// to 8 s): on a machine where a round trip takes longer than a fixed
// wait, every answer would come after its ask gave up.
func (m *Member) reportLost(ctx context.Context, id string) (bool, error) {
	var last error
	wait := time.Second
	for notFound := 0; notFound < 20; {
		actx, cancel := context.WithTimeout(ctx, wait)
		res, err := actorutil.Request(actx, m.system.Root, m.shardFor(id), &messages.ReportLost{ObjectId: id, Node: m.ref})
		cancel()
		if errors.Is(err, messages.ErrTimeout) {
			wait = min(2*wait, 8*time.Second)
		}
		if err == nil {
			r, ok := res.(*messages.ReportLostReply)
			if !ok {
				return false, messages.Errorf(messages.ErrorCode_INTERNAL, "report lost %q: reply %T", id, res)
			}
			err = messages.ErrOrNil(r.GetError())
			if err == nil {
				return r.GetLost(), nil
			}
			if errors.Is(err, messages.ErrNotFound) {
				notFound++
			} else if !errors.Is(err, messages.ErrUnavailable) {
				return false, err
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("%w (last answer: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return false, last
}
