package directory

import (
	"slices"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// Subscribers are Reduce coordinators that follow an object's copies as
// they come and go (LocationUpdate pushes), to place each source in their
// tree when it appears.

type subscriber struct {
	key string
	to  any
}

// onSubscribe pushes every current and future location of the object to
// the subscriber; key identifies the subscriber for Unsubscribe. The
// subscriber also hears when the object is deleted, and when it is lost
// (LocationUpdate.error: now, if it is lost already, and whenever its
// last copy goes). A subscriber that located the object before
// (Subscribe.located_before) hears LOST too when the table knows no copy
// of it: the shell sets that flag only once every store node has
// republished (see internal/actors/shardactor), so no copy is left anywhere.
func (t *LocationTable) onSubscribe(req *messages.Subscribe, key string, to any) outbox.Box {
	id := req.GetObjectId()
	if err := t.check(id); err != nil {
		return outbox.Box{Sends: []outbox.Send{{To: to, Msg: &messages.LocationUpdate{ObjectId: id, Deleted: true}}}}
	}
	if out, ok := t.answerOnce(req, key, to); ok {
		return out
	}
	if !slices.ContainsFunc(t.entries[id].subscribersOrNil(), func(s subscriber) bool { return s.key == key }) {
		if err := t.admitSubscriber(id); err != nil {
			return outbox.Box{Sends: []outbox.Send{{To: to, Msg: &messages.LocationUpdate{ObjectId: id, Error: err}}}}
		}
	}
	e := t.entry(id)
	if !slices.ContainsFunc(e.subscribers, func(s subscriber) bool { return s.key == key }) {
		e.subscribers = append(e.subscribers, subscriber{key: key, to: to})
		ids := t.subsOf[key]
		if ids == nil {
			ids = map[string]struct{}{}
			t.subsOf[key] = ids
		}
		ids[id] = struct{}{}
	}
	var out []outbox.Send
	for _, loc := range t.sortedLocations(e) {
		if loc.unfed() || loc.unoffered {
			continue // see Locate
		}
		out = append(out, outbox.Send{To: to, Msg: e.update(loc.node, loc.state)})
	}
	if l, ok := t.lost[id]; ok {
		// Lost before this subscription (a Reduce that began after its
		// source's last copy died, or a resubscription): no location
		// will come unless the id is Put again, which the subscriber
		// will hear of.
		out = append(out, outbox.Send{To: to, Msg: lostUpdate(id, l.err)})
	} else if req.GetLocatedBefore() && !e.known && !e.target.reserved() {
		// The subscriber had a copy's location, and now no copy, no loss
		// and no deletion of the id is known: its copies went before
		// this table began (a shard that restarted or moved forgets its
		// lost marks, and a node that died with the shard's old host
		// republishes nothing). The subscriber (a Reduce waiting for the
		// source) waited for its deadline. A Reduce producing the id
		// (reservedBy) will create it: that is no loss.
		out = append(out, outbox.Send{To: to, Msg: lostUpdate(id, messages.Errorf(messages.ErrorCode_LOST,
			"object %q is lost: this directory shard knows no copy of it, and its subscriber located one before (every copy went before the shard started over); Put it again to re-create it", id))})
	}
	return outbox.Box{Sends: out}
}

// answerOnce answers a Subscribe with once_below whose answer carries the
// object's bytes, and reports whether it did: the subscriber needs no
// more of the object, so the table keeps no subscription, which would
// cost an Unsubscribe, or a watch of the subscriber, when the subscriber
// is done with it (a small Reduce's coordinator: one per source). The
// answer's last update says so (ended). A subscriber that follows the
// object already keeps following it: its standing subscription asked for
// every update.
func (t *LocationTable) answerOnce(req *messages.Subscribe, key string, to any) (outbox.Box, bool) {
	e := t.entries[req.GetObjectId()]
	if req.GetOnceBelow() <= 0 || e == nil || !e.hasInline || e.size >= req.GetOnceBelow() {
		return outbox.Box{}, false
	}
	if _, lost := t.lost[e.id]; lost || slices.ContainsFunc(e.subscribers, func(s subscriber) bool { return s.key == key }) {
		return outbox.Box{}, false
	}
	var out []outbox.Send
	for _, loc := range t.sortedLocations(e) {
		if loc.unfed() || loc.unoffered {
			continue // see Locate
		}
		out = append(out, outbox.Send{To: to, Msg: e.update(loc.node, loc.state)})
	}
	if len(out) == 0 {
		return outbox.Box{}, false
	}
	out[len(out)-1].Msg.(*messages.LocationUpdate).Ended = true
	return outbox.Box{Sends: out}, true
}

// lostUpdate tells a subscriber that no copy of id is left (err: LOST).
func lostUpdate(id string, err *messages.Error) *messages.LocationUpdate {
	return &messages.LocationUpdate{ObjectId: id, Error: err}
}

// onUnsubscribe stops the pushes to the subscriber with this key.
func (t *LocationTable) onUnsubscribe(req *messages.Unsubscribe, key string) outbox.Box {
	e := t.entries[req.GetObjectId()]
	if e == nil {
		return outbox.Box{}
	}
	t.unsubscribe(e, key)
	return outbox.Box{}
}

func (t *LocationTable) unsubscribe(e *entry, key string) {
	e.subscribers = slices.DeleteFunc(e.subscribers, func(s subscriber) bool { return s.key == key })
	if ids := t.subsOf[key]; ids != nil {
		delete(ids, e.id)
		if len(ids) == 0 {
			delete(t.subsOf, key)
		}
	}
	t.forgetIfIdle(e)
}

// DropSubscriber ends every subscription of the subscriber with this key:
// it stopped (a coordinator whose member died, or a peer that subscribed
// and went), and nothing else would ever remove them.
func (t *LocationTable) DropSubscriber(key string) {
	for id := range t.subsOf[key] {
		if e := t.entries[id]; e != nil {
			t.unsubscribe(e, key)
		}
	}
	delete(t.subsOf, key)
}

// Subscribed reports whether any subscription has this key.
func (t *LocationTable) Subscribed(key string) bool { return len(t.subsOf[key]) > 0 }

// admitSubscriber refuses a new subscription of id when the table is at
// MaxEntries and holds no entry for id, or when MaxSubscribersPerObject
// subscribers follow it already.
func (t *LocationTable) admitSubscriber(id string) *messages.Error {
	e := t.entries[id]
	if e == nil && len(t.entries) >= t.cfg.MaxEntries {
		return messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
			"this directory shard holds %d entries (its bound) and none for %q; retry later", len(t.entries), id)
	}
	if e != nil && len(e.subscribers) >= t.cfg.MaxSubscribersPerObject {
		return messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
			"%d subscribers already follow %q at its directory shard (the bound); retry later", len(e.subscribers), id)
	}
	return nil
}

func (e *entry) subscribersOrNil() []subscriber {
	if e == nil {
		return nil
	}
	return e.subscribers
}

func (e *entry) update(node *messages.NodeRef, state messages.LocationState) *messages.LocationUpdate {
	return &messages.LocationUpdate{ObjectId: e.id, Size: e.size, Node: node, State: state,
		HasInline: e.hasInline, InlineData: e.inline}
}

func (e *entry) notify(node *messages.NodeRef, state messages.LocationState) []outbox.Send {
	out := make([]outbox.Send, 0, len(e.subscribers))
	for _, s := range e.subscribers {
		out = append(out, outbox.Send{To: s.to, Msg: e.update(node, state)})
	}
	return out
}
