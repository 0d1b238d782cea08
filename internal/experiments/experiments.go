// Package experiments holds the switches that only benchmarks and tests
// turn: the baselines a measurement compares Hoplite against and the
// ablations that force what the cost model would choose. No operator sets
// them, so they are not in cluster's configurations, nor in `hoplite node
// -h`.
//
// Package bench (and a test) builds a Set and puts it into a cluster
// configuration with In; `hoplite node` reads one from its hidden
// -experiments flag (Parse), which the bench passes to the nodes it
// starts.
package experiments

import (
	"fmt"
	"strconv"
	"strings"
)

// Flag is the name of `hoplite node`'s hidden flag that carries a Set in
// its String form, e.g. -experiments naive,reduce-degree=2.
const Flag = "experiments"

// Set is one combination of experiments. The zero Set is production.
type Set struct {
	// Naive makes every Get fetch from the creator and every Reduce
	// gather at its caller: the baseline without collectives. It applies
	// to a member's own Gets and Reduces, so a naive cluster sets it on
	// every member.
	Naive bool
	// ReduceDegree, if > 0, forces the reduce tree degree instead of the
	// cost model's (the degree ablation).
	ReduceDegree int
	// ReduceShape forces the reduce tree shape: cluster.ShapeDAry (the
	// default) or cluster.ShapeChainLeaf.
	ReduceShape string
	// AllReduceShape forces the shape of AllReduces that could be sliced:
	// cluster.ShapeSliced (reduce-scatter, all-gather) or cluster.ShapeDAry
	// (reduce, then broadcast); "" lets the cost model choose.
	//
	// Degree and shapes are the coordinators' on a member, which serve the
	// Reduces whose target's directory shard is placed there: every member
	// of a cluster should use the same values, or plans mix.
	AllReduceShape string
	// ActorLocates sends every Locate as an actor message instead of a
	// control request on the data plane.
	ActorLocates bool
	// UnbatchedReduceTasks makes a member's coordinators send each reduce
	// task as a message of its own instead of one batch per node.
	UnbatchedReduceTasks bool
	// NoRingGather makes a member's sliced AllReduces gather every slice
	// from its root instead of around the ring of participants.
	NoRingGather bool
	// NoInlinePush makes a member's inline AllReduces leave their
	// participants to locate the result instead of pushing it to them.
	NoInlinePush bool
	// NoWarmUp leaves a member cold when it reports ready: no data-plane
	// connections to its peers until an operation needs them, no message
	// codecs built, no stated link rate taken as its bandwidth, no choice
	// of the pages of large buffers, no warm memory.
	NoWarmUp bool
	// ActorSubscribes makes a member's Reduce coordinators subscribe to
	// their sources by actor message instead of on the data plane.
	ActorSubscribes bool
	// BenchAgent makes `hoplite node` run the bench agent, which creates
	// objects inside the node for a bench driver (package bench). The
	// member itself ignores it.
	BenchAgent bool
}

// switches are the Set's on/off experiments by name, in String's order.
var switches = []struct {
	name string
	on   func(*Set) *bool
}{
	{"naive", func(s *Set) *bool { return &s.Naive }},
	{"actor-locates", func(s *Set) *bool { return &s.ActorLocates }},
	{"unbatched-reduce-tasks", func(s *Set) *bool { return &s.UnbatchedReduceTasks }},
	{"no-ring-gather", func(s *Set) *bool { return &s.NoRingGather }},
	{"no-inline-push", func(s *Set) *bool { return &s.NoInlinePush }},
	{"no-warm-up", func(s *Set) *bool { return &s.NoWarmUp }},
	{"actor-subscribes", func(s *Set) *bool { return &s.ActorSubscribes }},
	{"bench-agent", func(s *Set) *bool { return &s.BenchAgent }},
}

// Names lists every experiment Parse knows, the valued ones as NAME=.
func Names() []string {
	names := []string{"reduce-degree=", "reduce-shape=", "allreduce-shape="}
	for _, sw := range switches {
		names = append(names, sw.name)
	}
	return names
}

// Parse reads a comma-separated list of experiments: the names of
// switches (naive, actor-locates, unbatched-reduce-tasks, no-ring-gather,
// no-inline-push, no-warm-up, actor-subscribes, bench-agent) and
// reduce-degree=N, reduce-shape=SHAPE, allreduce-shape=SHAPE. The empty
// list is the zero Set. Values are checked where they are used (a
// member's configuration refuses an unknown shape).
func Parse(list string) (Set, error) {
	var s Set
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, valued := strings.Cut(item, "=")
		switch name {
		case "reduce-degree":
			d, err := strconv.Atoi(value)
			if err != nil {
				return Set{}, fmt.Errorf("experiment %q: the degree must be an integer", item)
			}
			s.ReduceDegree = d
			continue
		case "reduce-shape":
			s.ReduceShape = value
			continue
		case "allreduce-shape":
			s.AllReduceShape = value
			continue
		}
		found := false
		for _, sw := range switches {
			if sw.name == name {
				found = true
				*sw.on(&s) = true
			}
		}
		if !found || valued {
			return Set{}, fmt.Errorf("unknown experiment %q (known: %s)", item, strings.Join(Names(), ", "))
		}
	}
	return s, nil
}

// String is the Set as Parse reads it ("" for the zero Set).
func (s Set) String() string {
	var items []string
	for _, sw := range switches {
		if *sw.on(&s) {
			items = append(items, sw.name)
		}
	}
	if s.ReduceDegree != 0 {
		items = append(items, "reduce-degree="+strconv.Itoa(s.ReduceDegree))
	}
	if s.ReduceShape != "" {
		items = append(items, "reduce-shape="+s.ReduceShape)
	}
	if s.AllReduceShape != "" {
		items = append(items, "allreduce-shape="+s.AllReduceShape)
	}
	return strings.Join(items, ",")
}

// access are the ways In reaches a configuration's Set: packages cluster
// and internal/member keep it in an unexported field, out of the API an
// operator reads, and each registers its way in (Register) when it is
// initialised. Package initialisation runs before main and before any
// test, so access is only read once it is complete.
var access []func(cfg any) *Set

// Register is for packages cluster and internal/member only: f returns
// the Set inside cfg, one of its package's configurations, and nil for
// anything else.
func Register(f func(cfg any) *Set) { access = append(access, f) }

// In returns the Set of cfg, a *cluster.MemberConfig or *cluster.Config
// (or internal/member's own), for the caller to read or change; nil for
// any other type (or if no package that registers is linked in, when
// there is no such configuration).
func In(cfg any) *Set {
	for _, f := range access {
		if s := f(cfg); s != nil {
			return s
		}
	}
	return nil
}
