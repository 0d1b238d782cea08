package storeactor

import (
	"sync"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/messages"
)

// positionOutput is a reduce position's output, shared by its worker and
// the store node that spawned it, so that a release which drops it takes
// effect in the store node's own turn, before the next message it
// handles.
//
// The worker's runs make the output on their own goroutines, and the
// worker hears of its release only after the store node has moved on: a
// coordinator that abandons a run (coordinator.replan) sends a node the
// drop of its copy of the target, the release of the old run, then the
// new run's tasks, and soon a Get of the target. If the old run still
// made its output after that (a worker scheduled late on a loaded
// machine), it would take what the new run has on this node under the
// same id (a Get's placeholder, promoted as a root's would be, or a
// copy fetched from the new root, removed as stale) and then drop it as
// released: the new run's Get failed with NOT_FOUND
// (TestSlicedAllReduceParticipantKilled). If it had made its output
// before the release but after the drop, a Get handled right after the
// release attached to that old copy, which the worker then dropped
// under it. So making the output and releasing the position exclude
// each other here: once released, the position makes nothing more, and
// what it made is gone when the release has been handled.
type positionOutput struct {
	mu       sync.Mutex
	obj      *objstore.Object
	target   bool // obj is a copy of the Reduce's target (keepsTarget)
	released bool
}

// errReleased refuses a run of a released position its output.
var errReleased = messages.Errorf(messages.ErrorCode_CANCELED, "the reduce position was released")

// load is the output, nil before the first run made it.
func (p *positionOutput) load() *objstore.Object {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.obj
}

// isReleased reports whether the position was released without its
// output.
func (p *positionOutput) isReleased() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.released
}

// create makes the output with mk (a objstore.Store operation, which
// must not wait on anything) and records it, unless the position was
// released: then nothing is made and create returns errReleased. It
// returns the output it replaced (an earlier generation's), which the
// caller aborts once the new one is in place.
func (p *positionOutput) create(target bool, mk func() (*objstore.Object, error)) (out, prev *objstore.Object, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released {
		return nil, nil, errReleased
	}
	if out, err = mk(); err != nil {
		return nil, nil, err
	}
	prev, p.obj, p.target = p.obj, out, target
	return out, prev, nil
}

// undo puts back the output that create replaced, if out is still the
// recorded one: a root whose target the shard refused has no output.
func (p *positionOutput) undo(out, prev *objstore.Object) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.obj == out {
		p.obj = prev
	}
}

// release marks the position released without its output and returns
// that output (nil if none), for the caller to drop (dropReleased). The
// position forgets it: see forget.
func (p *positionOutput) release() (o *objstore.Object, target bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.released = true
	o, target = p.obj, p.target
	p.obj = nil
	return o, target
}

// forget drops the position's reference to its output once its worker
// stops (the store keeps a kept target; a dropped output is garbage).
//
// Why: a stopped actor's process stays reachable as long as any PID
// that cached it does (the Reduce's coordinator, for one, keeps its
// local workers' PIDs in its watcher list until it stops), and with it
// the worker and this position. Holding the output too kept a sliced
// AllReduce's chain outputs and result copy alive past the Delete on
// the coordinator's member, so the warm-up's reserve there was never
// whole again and every later AllReduce's buffers there were new memory
// (docs/benchmarks.md, "The coordinator's member"; which holder kept the
// workers that long there is not known, and does not matter once they
// hold no output).
func (p *positionOutput) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.obj = nil
}

// dropReleased frees a released position's output o. Abort drops the
// object only while it is still the store's copy of that id, so a later
// object of the same id is never touched (and dropping twice, by the
// store node and then by the worker, is harmless). A parent still
// reading an intermediate learns UNAVAILABLE, as from a node that
// failed, and waits for its repaired task: a node being killed loses its
// coordinator first (its remote endpoints close before its store fails),
// and NOT_FOUND here made the parent fail the whole Reduce before the
// failure notice could repair it (TestReduceSurvivesKillsOfSourceNodes,
// seed 4). A copy of the target (target) says NOT_FOUND: the Reduce run
// that made it is over.
func dropReleased(store *objstore.Store, o *objstore.Object, target bool, reduceID string) {
	code := messages.ErrorCode_UNAVAILABLE
	if target {
		code = messages.ErrorCode_NOT_FOUND
	}
	store.Abort(o, messages.Errorf(code, "reduce %s released its output", reduceID))
}
