package storenode

import (
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// waitingGet is a Get waiting for its object.
type waitingGet struct {
	m        *messages.Get
	sender   *actor.PID
	deadline time.Time
	timer    *time.Timer // sends getExpired at the deadline
}

// objectSettled tells the store node that an object Gets wait on is
// complete or failed.
type objectSettled struct{ obj *storenode.Object }

// getExpired tells the store node that a waiting Get's deadline passed.
type getExpired struct {
	obj *storenode.Object
	w   *waitingGet
}

// getWaiters are the Gets waiting on objects, by object (an id fetched
// again after a failure is a new storenode.Object, with its own waiters). Only the
// store node actor uses it, one message at a time.
type getWaiters struct {
	byObj map[*storenode.Object][]*waitingGet
	// notified marks the objects with a settle notice registered: one
	// per object however many Gets come and go, so an object that never
	// settles holds no growing list of notices.
	notified map[*storenode.Object]bool
}

func newGetWaiters() *getWaiters {
	return &getWaiters{byObj: map[*storenode.Object][]*waitingGet{}, notified: map[*storenode.Object]bool{}}
}

// add makes w wait on obj; notify is registered with the object if no
// notice is pending yet.
func (g *getWaiters) add(obj *storenode.Object, w *waitingGet, notify func()) {
	g.byObj[obj] = append(g.byObj[obj], w)
	if !g.notified[obj] {
		g.notified[obj] = true
		obj.OnSettled(notify)
	}
}

// settle takes the waiters of obj if it is complete (err nil) or failed;
// if it was rewound since its notice, they keep waiting and notify is
// registered again.
func (g *getWaiters) settle(obj *storenode.Object, notify func()) ([]*waitingGet, error) {
	delete(g.notified, obj)
	if len(g.byObj[obj]) == 0 {
		delete(g.byObj, obj)
		return nil, nil
	}
	_, done, err := obj.Progress()
	if !done && err == nil {
		g.notified[obj] = true
		obj.OnSettled(notify)
		return nil, nil
	}
	ws := g.byObj[obj]
	delete(g.byObj, obj)
	return ws, err
}

// remove withdraws w (its deadline passed); false if it was answered.
func (g *getWaiters) remove(obj *storenode.Object, w *waitingGet) bool {
	ws := g.byObj[obj]
	i := slices.Index(ws, w)
	if i < 0 {
		return false
	}
	ws = slices.Delete(ws, i, i+1)
	if len(ws) == 0 {
		delete(g.byObj, obj) // its notice stays registered: settle clears it
	} else {
		g.byObj[obj] = ws
	}
	return true
}
