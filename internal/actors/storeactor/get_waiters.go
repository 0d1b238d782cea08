package storeactor

import (
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// waitingGet is a Get waiting for its object.
type waitingGet struct {
	m        *messages.Get
	sender   *actor.PID
	deadline time.Time
	timer    *time.Timer // sends getExpired at the deadline
	source   string      // the sender's process, "" for this one (see maxWaitingGetsPerSource)
}

// objectSettled tells the store node that an object Gets wait on is
// complete or failed.
type objectSettled struct{ obj *objstore.Object }

// getExpired tells the store node that a waiting Get's deadline passed.
type getExpired struct {
	obj *objstore.Object
	w   *waitingGet
}

// getWaiters are the Gets waiting on objects, by object (an id fetched
// again after a failure is a new objstore.Object, with its own waiters). Only the
// store node actor uses it, one message at a time.
type getWaiters struct {
	byObj map[*objstore.Object][]*waitingGet
	// notified marks the objects with a settle notice registered: one
	// per object however many Gets come and go, so an object that never
	// settles holds no growing list of notices.
	notified map[*objstore.Object]bool
	// total and bySource count the waiting Gets, which admit bounds.
	total    int
	bySource map[string]int
}

// Every parked Get holds a timer, a waiter and often a fetch with its
// Locate at a shard: a peer that asks for ids nobody creates, with long
// deadlines, would hold them without bound. A store node therefore parks
// at most maxWaitingGets Gets, and at most maxWaitingGetsPerSource from
// any one other process; its own process's application actors count
// only in the total. Far above what a task-based application keeps
// waiting (one per object it consumes), well below what exhausts a
// member's memory (about 1 KiB each).
const (
	maxWaitingGets          = 1 << 16
	maxWaitingGetsPerSource = 1 << 12
)

func newGetWaiters() *getWaiters {
	return &getWaiters{byObj: map[*objstore.Object][]*waitingGet{}, notified: map[*objstore.Object]bool{},
		bySource: map[string]int{}}
}

// admit says whether one more Get from source may wait, and if not, why:
// a RESOURCE_EXHAUSTED error that names the bound.
func (g *getWaiters) admit(source string) *messages.Error {
	if g.total >= maxWaitingGets {
		return messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
			"this store node already has %d Gets waiting for their objects (its bound); retry later", g.total)
	}
	if source != "" && g.bySource[source] >= maxWaitingGetsPerSource {
		return messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
			"%s already has %d Gets waiting at this store node (the bound per process); retry later", source, g.bySource[source])
	}
	return nil
}

// counted adds d to the counts of w's source.
func (g *getWaiters) counted(w *waitingGet, d int) {
	g.total += d
	if w.source == "" {
		return
	}
	if n := g.bySource[w.source] + d; n > 0 {
		g.bySource[w.source] = n
	} else {
		delete(g.bySource, w.source)
	}
}

// add makes w wait on obj; notify is registered with the object if no
// notice is pending yet.
func (g *getWaiters) add(obj *objstore.Object, w *waitingGet, notify func()) {
	g.counted(w, 1)
	g.byObj[obj] = append(g.byObj[obj], w)
	if !g.notified[obj] {
		g.notified[obj] = true
		obj.OnSettled(notify)
	}
}

// settle takes the waiters of obj if it is complete (err nil) or failed;
// if it was rewound since its notice, they keep waiting and notify is
// registered again.
func (g *getWaiters) settle(obj *objstore.Object, notify func()) ([]*waitingGet, error) {
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
	for _, w := range ws {
		g.counted(w, -1)
	}
	return ws, err
}

// remove withdraws w (its deadline passed); false if it was answered.
func (g *getWaiters) remove(obj *objstore.Object, w *waitingGet) bool {
	ws := g.byObj[obj]
	i := slices.Index(ws, w)
	if i < 0 {
		return false
	}
	ws = slices.Delete(ws, i, i+1)
	g.counted(w, -1)
	if len(ws) == 0 {
		delete(g.byObj, obj) // its notice stays registered: settle clears it
	} else {
		g.byObj[obj] = ws
	}
	return true
}

// takeAll takes every waiting Get (the node is stopping: their notices
// and timers would reach a stopped actor).
func (g *getWaiters) takeAll() []*waitingGet {
	var all []*waitingGet
	for _, ws := range g.byObj {
		all = append(all, ws...)
	}
	clear(g.byObj)
	clear(g.notified)
	clear(g.bySource)
	g.total = 0
	return all
}
