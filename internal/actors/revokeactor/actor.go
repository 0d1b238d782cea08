package revokeactor

import (
	"slices"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/messages"
)

// ActorConfig configures one member's broadcaster actor: the supervised
// shell around a revoke.Broadcaster.
type ActorConfig struct {
	// Self is this member's id, as it appears in member lists.
	Self string
	// Peer returns the broadcaster actor of a member; nil skips the send
	// (a member whose address is unknown is treated as dead).
	Peer func(member string) *actor.PID
	// Deliver delivers a notice locally (directory cleanup, transfer
	// abort, coordinator repair, event published). It runs in the actor,
	// once per notice, after the notice was forwarded. A Deliver that
	// panics restarts the actor; the notice is not delivered again (the
	// broadcast state survives restarts), so Deliver should do the part
	// that matters first.
	Deliver func(ctx actor.Context, d Delivery)
	// Admit, if set, vets each copy received from another member before
	// the broadcast core sees it: a copy it refuses is neither forwarded
	// nor delivered. Members use it to drop notices that cannot be about
	// their cluster (a late message to an address another cluster's
	// member used before).
	Admit func(m *messages.RevokeNotice) bool
	// Log receives dropped input and overlay errors.
	Log *logrus.Entry
	// Options configure the revoke.Broadcaster (window, replay).
	Options []revoke.Option
}

// Delivery is one notice delivered at this member.
type Delivery struct {
	// Notice carries the failed member's address as the originator knew
	// it (SubjectAddress).
	Notice revoke.Notice
	// From is the member whose copy was the first to arrive here ("" if
	// this member originated the notice).
	From string
}

// Originate asks the local broadcaster to spread a notice: the first
// member to learn of a failure sends it. In-process only (never crosses a
// process: the copies that travel are *messages.RevokeNotice).
type Originate struct {
	Notice revoke.Notice
}

// SetMembers switches the broadcaster to the overlay of a new member list
// (in any order; self is added if missing). In-process only.
type SetMembers struct {
	Members []string
}

// state is what survives a restart of the actor: the broadcast state, so
// a restarted broadcaster does not forward or deliver a notice twice.
type state struct {
	core *revoke.Broadcaster
}

// broadcasterActor is the thin shell: messages in, revoke.Broadcaster calls,
// decisions out as sends and local deliveries.
type broadcasterActor struct {
	cfg ActorConfig
	st  *state
}

// NewActorProps returns the props of a broadcaster actor. Spawn one per
// member (the member package names it "node/revoke") under a supervisor
// that restarts it.
func NewActorProps(cfg ActorConfig) *actor.Props {
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	st := &state{}
	return actorutil.Props(func() actor.Actor { return &broadcasterActor{cfg: cfg, st: st} })
}

// Receive implements actor.Actor.
func (a *broadcasterActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.started()
	case *SetMembers:
		a.setMembers(ctx, m.Members)
	case *Originate:
		a.originate(ctx, m.Notice)
	case *messages.RevokeNotice:
		a.received(ctx, m)
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		a.cfg.Log.WithField("type", actorutil.TypeName(m)).Debug("revoke: dropped an unknown message")
	}
}

// started builds the overlay of this member alone; a restarted actor
// keeps the core it had (it lives in st).
func (a *broadcasterActor) started() {
	if a.st.core != nil {
		return
	}
	o, err := revoke.NewOverlay([]string{a.cfg.Self}, a.cfg.Self)
	if err != nil {
		a.cfg.Log.WithError(err).Error("revoke: cannot build the overlay of self")
		return
	}
	a.st.core = revoke.NewBroadcaster(o, a.cfg.Options...)
}

// originate starts the broadcast of a notice this member raises.
func (a *broadcasterActor) originate(ctx actor.Context, n revoke.Notice) {
	if a.st.core == nil || n.Subject == "" {
		return
	}
	if n.Origin == "" {
		n.Origin = a.cfg.Self
	}
	a.step(ctx, "", revoke.Originate{Notice: n})
}

// received steps the core with a peer's notice, unless the notice is not
// this cluster's (Admit) or names no subject.
func (a *broadcasterActor) received(ctx actor.Context, m *messages.RevokeNotice) {
	if a.st.core == nil {
		return
	}
	if m.GetSubject() == "" {
		a.cfg.Log.WithField("from", m.GetFrom()).Debug("revoke: dropped a notice without a subject")
		return
	}
	if a.cfg.Admit != nil && !a.cfg.Admit(m) {
		return
	}
	a.step(ctx, m.GetFrom(), revoke.Received{From: m.GetFrom(), Notice: revoke.NoticeOf(m)})
}

func (a *broadcasterActor) setMembers(ctx actor.Context, members []string) {
	if a.st.core == nil {
		return
	}
	list := make([]string, 0, len(members)+1)
	for _, id := range members {
		if id != "" {
			list = append(list, id)
		}
	}
	if !slices.Contains(list, a.cfg.Self) {
		list = append(list, a.cfg.Self)
	}
	slices.Sort(list)
	list = slices.Compact(list)
	o, err := revoke.NewOverlay(list, a.cfg.Self)
	if err != nil {
		a.cfg.Log.WithError(err).Warn("revoke: bad member list; keeping the old overlay")
		return
	}
	drive.Step(ctx, a, a.st.core, revoke.Reoverlay{Overlay: o})
}

// step steps the core with a notice that came from member from ("":
// this member) and delivers it if the core says so.
func (a *broadcasterActor) step(ctx actor.Context, from string, ev revoke.Event) {
	// ULFM order: the wave moves on (the driver carries out the sends)
	// before the local delivery, so a slow or crashing delivery does not
	// stop it.
	d, _ := drive.Step(ctx, a, a.st.core, ev)
	if !d.Deliver || a.cfg.Deliver == nil {
		return
	}
	var n revoke.Notice
	switch e := ev.(type) {
	case revoke.Originate:
		n = e.Notice
	case revoke.Received:
		n = e.Notice
	}
	a.cfg.Deliver(ctx, Delivery{Notice: n, From: from})
}

// drive steps the broadcaster and carries out its decisions (the
// generic driver): a copy goes to the member it names, through
// ActorConfig.Peer; a send to a dead member simply fails (reliability comes from the overlay's
// connectivity, not from retries). The notice's subject is the failed
// member: it gets no copy (a send to a dead process only costs a
// connection attempt, and in Proto.Actor remote that attempt can outlive
// the process and hit a new incarnation at the same address).
var drive = &shell.Driver[*broadcasterActor, revoke.Event, revoke.Decision]{Carrier: shell.Carrier[*broadcasterActor]{
	Route: func(ctx actor.Context, a *broadcasterActor, s outbox.Send) bool {
		to, _ := s.To.(string)
		n, _ := s.Msg.(*messages.RevokeNotice)
		if a.cfg.Peer == nil || n == nil || to == n.GetSubject() {
			return true // nobody gets it
		}
		if pid := a.cfg.Peer(to); pid != nil {
			ctx.Send(pid, n)
		}
		return true
	},
}}
