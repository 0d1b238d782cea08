package processtest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/history"
	"github.com/hoplite-go/hoplite/messages"
)

// processHistory records one process chaos round's calls and faults for
// internal/history: the members are numbered by their process (a
// restarted member is another number).
type processHistory struct {
	mu      sync.Mutex
	h       history.History
	members []*nodeProc
}

// member is n's number in the history.
func (r *processHistory) member(n *nodeProc) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.memberLocked(n)
}

func (r *processHistory) memberLocked(n *nodeProc) int {
	if n == nil {
		return -1
	}
	if i := slices.Index(r.members, n); i >= 0 {
		return i
	}
	r.members = append(r.members, n)
	return len(r.members) - 1
}

// byID is the number of the member whose id is id among known, or -1.
func (r *processHistory) byID(id string, known []*nodeProc) int {
	for _, n := range known {
		if n.id == id {
			return r.member(n)
		}
	}
	return -1
}

// call records a call of kind on n of object id that ran from begin to
// end under deadline, with the fingerprint of the bytes it put or got.
func (r *processHistory) call(label string, kind history.OpKind, n *nodeProc, id string, host int, data []byte,
	begin, end, deadline time.Time, err error) {
	o := history.Op{Label: label, Kind: kind, Object: id, Hosts: [2]int{host, host}, Size: int64(len(data)),
		Begin: begin, End: end, Deadline: deadline}
	if data != nil {
		o.Sum = fingerprint.Of(data)
	}
	var me *messages.Error
	switch {
	case err == nil:
	case errors.As(err, &me):
		o.Code = me.GetCode()
	default:
		o.Code = messages.ErrorCode_INTERNAL
	}
	r.mu.Lock()
	o.Member = r.memberLocked(n)
	o.ID = len(r.h.Ops)
	r.h.Ops = append(r.h.Ops, o)
	r.mu.Unlock()
}

// fault records a kill or a pause of n from begin to end.
func (r *processHistory) fault(kind history.EventKind, n *nodeProc, begin, end time.Time) {
	r.mu.Lock()
	r.h.Events = append(r.h.Events, history.Event{Kind: kind, Member: r.memberLocked(n), Shard: -1, Begin: begin, End: end})
	r.mu.Unlock()
}

// processModel is the fault model as the processes run it: an answer
// may come a little past its deadline, and a fault explains a slow call
// until the members detected it (health checks and the failure notice).
var processModel = history.Model{Grace: 2 * time.Second, Settle: 15 * time.Second}

// check checks the round's history and says each violation.
func (r *processHistory) check() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, v := range history.Check(r.h, processModel).Violations {
		out = append(out, v.String())
	}
	if len(out) > 0 {
		var faults []string
		for _, e := range r.h.Events {
			faults = append(faults, e.String()+" ("+r.members[e.Member].id+")")
		}
		out = append(out, "faults: "+strings.Join(faults, "; "))
	}
	return out
}

// pauseAfter stops n with SIGSTOP after d for pause, records it, and
// closes the returned channel once n runs again.
func (pc *processChaos) pauseAfter(n *nodeProc, d, pause time.Duration, rec *processHistory) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(d)
		begin := time.Now()
		if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			pc.t.Errorf("seed %d: SIGSTOP %s: %v", pc.seed, n.id, err)
			return
		}
		time.Sleep(pause)
		if err := n.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			pc.t.Errorf("seed %d: SIGCONT %s: %v", pc.seed, n.id, err)
		}
		rec.fault(history.Pause, n, begin, time.Now())
	}()
	return done
}
