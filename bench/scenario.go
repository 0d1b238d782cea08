package bench

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/reduction"
)

// Scenarios are the benchmark scenarios, in the order the help lists them.
var Scenarios = []string{"p2p", "broadcast", "gather", "reduce", "allreduce", "async", "degree", "failure"}

// scenarioHelp describes each scenario (for the command's usage).
var scenarioHelp = map[string]string{
	"p2p":       "one object from host 0 to host 1",
	"broadcast": "host 0 creates an object, the N-1 others Get it",
	"gather":    "each of the N-1 other hosts creates one object, host 0 Gets them all",
	"reduce":    "SUM of N float32 objects, one per host, called on host 0",
	"allreduce": "reduce, and every host gets the result",
	"async":     "reduce with the sources arriving one by one every --interval; time from the last arrival",
	"degree":    "reduce with tree degree d = 1, 2, N, the published code's chain-leaf shape and the degree the cost model chooses",
	"failure":   "broadcast and reduce with one participant killed at 50 % of the failure-free median; with --degree, each forced reduce tree too, killed at 50 % of its own",
}

// ScenarioHelp is one line per scenario, for usage texts.
func ScenarioHelp() string {
	s := ""
	for _, name := range Scenarios {
		s += fmt.Sprintf("  %-10s %s\n", name, scenarioHelp[name])
	}
	return s
}

// Systems, as they appear in tables, RESULT lines and JSON.
const (
	SysOurs        = "ours"
	SysNaive       = "naive"
	SysMPIDefault  = "mpi-default"
	SysMPIBest     = "mpi-best"
	SysDask        = "dask"
	SysGlooDefault = "gloo-default"
	SysGlooBest    = "gloo-best"
	SysOursFailure = "ours" + FailureSuffix
	// SysOursTLS is ours with every node over mutual TLS (--tls).
	SysOursTLS = "ours-tls"
	// SysActorRTT is the actor control plane's floor (--peers actor):
	// bare Proto.Actor requests and responses between the bench agents of
	// hoplite nodes, in the fan-in or fan-out of the scenario's control
	// messages (see measurement.floor). Testbed only.
	SysActorRTT = "actor-rtt"
	// SysDataRTT is the data plane's floor (--peers data): the round
	// trips of SysActorRTT as bare control requests on the data plane's
	// connections (messages.ControlPing), the way a Get's Locate travels.
	// Testbed only.
	SysDataRTT = "data-rtt"
	// SysEchoRTT is the network's floor for SysDataRTT's round trips
	// (--peers echo): a request and its reply of 64 bytes over TCP in C
	// (bench/peers/echo), in the same pattern, timed the same way.
	// Testbed only; p2p and broadcast.
	SysEchoRTT = "echo-rtt"
)

// FailureSuffix names the failure variant of a system in the failure
// scenario: "ours-failure", "d=2-failure", "chain-leaf-failure", the
// system with host 1 killed at 50 % of its own failure-free median.
const FailureSuffix = "-failure"

// DegreeN in Options.Degrees stands for N, the number of hosts.
const DegreeN = -1

// DegreeChainLeaf in Options.Degrees stands for the published code's
// shape, a binary tree whose leaves are chains of length about S/(B·L)
// (the experiment reduce-shape=chain-leaf), in the column SysChainLeaf.
const DegreeChainLeaf = -2

// SysChainLeaf is the column of DegreeChainLeaf.
const SysChainLeaf = "chain-leaf"

// SysReduceBcast is ours with AllReduces forced to reduce, then
// broadcast (the experiment allreduce-shape=d-ary): the allreduce scenario's
// comparison with the sliced shape the cost model usually picks.
const SysReduceBcast = "reduce-bcast"

// SysActorLocates is ours with every Locate sent as an actor message
// (--peers actor-locates, the experiment actor-locates) instead of on the
// data plane: what the data plane saves, measured in the same run.
const SysActorLocates = "ours-actor-locates"

// SysSliced is ours with AllReduces forced to the sliced shape (--peers
// sliced, the experiment allreduce-shape=sliced): beside ours and
// reduce-bcast, what the shape the cost model did not pick costs, where
// it picked reduce-then-broadcast.
const SysSliced = "sliced"

// SysStarGather is ours with a sliced AllReduce's gathers fetching every
// slice from its root (--peers star-gather, the experiment no-ring-gather)
// instead of around the ring: what the ring saves, measured in the same
// run.
const SysStarGather = "ours-star-gather"

// SysNoPush is ours with an inline AllReduce's participants locating its
// result at the target's shard (--peers no-push, the experiment
// no-inline-push) instead of receiving it with their Gets: what the push
// saves, measured in the same run.
const SysNoPush = "ours-no-push"

// SysActorSubscribes is ours with Reduce coordinators subscribing to their
// sources by actor message (--peers actor-subscribes, the experiment
// actor-subscribes) instead of on the data plane: what the data plane
// saves, measured in the same run.
const SysActorSubscribes = "ours-actor-subscribes"

// SysAnyTarget is ours with each Reduce's target named as an application
// names it (--peers any-target): its directory shard, and so the
// Reduce's coordinator, wherever the ids' hash puts it, seven times in
// eight on another member than the caller's at N = 8. Ours picks targets
// whose shard is on the caller's member (TargetID).
const SysAnyTarget = "ours-any-target"

// SysGoProcs is ours with every testbed node at Go's default GOMAXPROCS
// (--peers go-procs): every CPU of the machine, which the testbed's
// members share, instead of its share of them (Options.NodeProcs).
const SysGoProcs = "ours-go-procs"

// SysKernelSlack is ours with every testbed node at the kernel's timer
// slack (--peers kernel-slack, hoplite node -timer-slack 0) instead of
// the node's default (see internal/timerslack): that setting measured in
// the same run.
const SysKernelSlack = "ours-kernel-slack"

// SysOursCold is ours with every testbed node left cold when it reports
// ready (--peers cold, the experiment no-warm-up): no data-plane
// connections to its peers until an operation dials them, no stated link
// rate taken as its bandwidth, 4 KiB pages for its object buffers
// (internal/member/warmup.go). With --fresh, its
// ratio to ours is what the warm-up saves a cluster's first operation.
const SysOursCold = "ours-cold"

// SysLazyFree is ours with every testbed node's Go runtime giving freed
// memory back to the kernel lazily (--peers lazy-free: GODEBUG=
// madvdontneed=0, MADV_FREE instead of MADV_DONTNEED): the pages of a
// deleted object's buffer stay mapped until the kernel needs them, so
// the next operation's buffers need not fault them in again. Its minflt
// beside ours's is what the heap's cooling between operations costs.
const SysLazyFree = "ours-lazy-free"

// SysSmallPages and SysHugePages are ours with every testbed node's
// large object buffers on 4 KiB pages or on transparent huge pages
// (--peers small-pages / huge-pages, hoplite node -pages small / huge)
// instead of the warm-up's measured choice: what that choice saves, in
// the same run.
const (
	SysSmallPages = "ours-small-pages"
	SysHugePages  = "ours-huge-pages"
)

// system is one column of a comparison.
type system struct {
	name string
	// exp are the experiments its members run with (the embedded
	// cluster's configuration, hoplite node -experiments): the baselines
	// and the forced reduce shapes.
	exp  experiments.Set
	kill bool // the failure variant: a participant is killed at 50 %
	// free is the kill variant's failure-free system (the same shape
	// without the kill), whose median places the kill.
	free string
	// anyTarget: a Reduce's target is the repetition's own id, not one
	// whose shard is on host 0 (SysAnyTarget).
	anyTarget bool
	// goProcs: the node runs at Go's default GOMAXPROCS whatever
	// Options.NodeProcs says.
	goProcs bool
	// kernelSlack: hoplite node -timer-slack 0.
	kernelSlack bool
	// lazyFree: the node runs with GODEBUG=madvdontneed=0 (SysLazyFree).
	lazyFree bool
	// pages: hoplite node -pages (SysSmallPages, SysHugePages; "": auto).
	pages string
	tls   bool // hoplite node -tls-cert/-tls-key/-tls-ca (testbed only)
	floor bool // SysActorRTT, SysDataRTT: bare round trips instead of the operation
	// dataPlane: the floor's round trips go on the data plane (SysDataRTT).
	dataPlane bool
	peer      string
	alg       string // the peer's --algorithm (mpi, gloo)
}

func (s system) ours() bool { return s.peer == "" }

// forced says whether s forces the reduce tree (a degree or a shape).
func (s system) forced() bool { return s.exp.ReduceDegree > 0 || s.exp.ReduceShape != "" }

// withFailure is s's failure variant: the same nodes, host 1 killed at
// 50 % of s's failure-free median.
func (s system) withFailure() system {
	k := s
	k.name, k.kill, k.free = s.name+FailureSuffix, true, s.name
	return k
}

// group is one comparison: a scenario at one size (and one arrival
// interval for async), measured on every system.
type group struct {
	scenario string // p2p, ..., failure-broadcast, failure-reduce
	kind     string // what is measured: p2p, broadcast, gather, reduce, allreduce, async
	size     int64
	interval time.Duration // async only
	hasInt   bool
}

func (g group) label() string {
	s := g.scenario + " " + SizeName(g.size)
	if g.hasInt {
		s += " every " + Seconds(g.interval)
	}
	return s
}

// ideal is the lower bound of the group's time with n hosts at b bytes
// per second: S/B, except gather ((n-1)·S/B: host 0's downlink receives
// everything) and allreduce (2·(n-1)/n·S/B, the bandwidth bound of an
// allreduce).
func (g group) ideal(n int, b float64) time.Duration {
	sb := float64(g.size) / b
	switch g.kind {
	case "gather":
		sb *= float64(n - 1)
	case "allreduce":
		sb *= 2 * float64(n-1) / float64(n)
	}
	return time.Duration(sb * float64(time.Second))
}

// groups lists the comparisons of a scenario.
func (o *Options) groups() []group {
	var out []group
	for _, size := range o.Sizes {
		switch o.Scenario {
		case "failure":
			out = append(out, group{scenario: "failure-broadcast", kind: "broadcast", size: size},
				group{scenario: "failure-reduce", kind: "reduce", size: size})
		case "degree":
			out = append(out, group{scenario: "degree", kind: "reduce", size: size})
		case "async":
			ivs := o.Intervals
			if len(ivs) == 0 {
				ivs = []time.Duration{time.Duration(float64(size) / o.Bandwidth.BytesPerSecond() / 4 * float64(time.Second))}
			}
			for _, iv := range ivs {
				out = append(out, group{scenario: "async", kind: "async", size: size, interval: iv, hasInt: true})
			}
		default:
			out = append(out, group{scenario: o.Scenario, kind: o.Scenario, size: size})
		}
	}
	return out
}

// systems lists the columns of a scenario, ours first.
func (o *Options) systems() []system {
	out := []system{{name: SysOurs}}
	if o.TLS {
		out = append(out, system{name: SysOursTLS, tls: true})
	}
	switch o.Scenario {
	case "failure":
		// The cost model's choice at both ends; each forced degree
		// below adds its own pair.
		out = append(out, system{name: SysOurs}.withFailure())
	case "allreduce":
		out = append(out, system{name: SysReduceBcast, exp: experiments.Set{AllReduceShape: reduction.ShapeDAry}})
	}
	degrees := o.Degrees
	if degrees == nil && o.Scenario == "degree" {
		degrees = []int{1, 2, DegreeN, DegreeChainLeaf}
	}
	for _, d := range degrees {
		var s system
		switch {
		case d == DegreeChainLeaf:
			if slices.ContainsFunc(out, func(s system) bool { return s.exp.ReduceShape != "" }) {
				continue
			}
			s = system{name: SysChainLeaf, exp: experiments.Set{ReduceShape: reduction.ShapeChainLeaf}}
		default:
			if d == DegreeN {
				d = o.Nodes
			}
			if slices.ContainsFunc(out, func(s system) bool { return s.exp.ReduceDegree == d }) {
				continue
			}
			s = system{name: "d=" + strconv.Itoa(d), exp: experiments.Set{ReduceDegree: d}}
		}
		out = append(out, s)
		if o.Scenario == "failure" {
			// Both ends of the trade-off: the shape failure-free, and
			// killed at 50 % of that shape's own median.
			out = append(out, s.withFailure())
		}
	}
	if o.Scenario == "failure" {
		return out // no peer has the failure scenarios
	}
	out = append(out, o.uiSystems()...)
	if slices.Contains(o.Peers, "actor-locates") {
		out = append(out, system{name: SysActorLocates, exp: experiments.Set{ActorLocates: true}})
	}
	if slices.Contains(o.Peers, "sliced") && o.Scenario == "allreduce" {
		out = append(out, system{name: SysSliced, exp: experiments.Set{AllReduceShape: reduction.ShapeSliced}})
	}
	if slices.Contains(o.Peers, "star-gather") {
		out = append(out, system{name: SysStarGather, exp: experiments.Set{NoRingGather: true}})
	}
	if slices.Contains(o.Peers, "no-push") {
		out = append(out, system{name: SysNoPush, exp: experiments.Set{NoInlinePush: true}})
	}
	if slices.Contains(o.Peers, "actor-subscribes") {
		out = append(out, system{name: SysActorSubscribes, exp: experiments.Set{ActorSubscribes: true}})
	}
	if slices.Contains(o.Peers, "go-procs") {
		out = append(out, system{name: SysGoProcs, goProcs: true})
	}
	if slices.Contains(o.Peers, "any-target") {
		out = append(out, system{name: SysAnyTarget, anyTarget: true})
	}
	if slices.Contains(o.Peers, "kernel-slack") {
		out = append(out, system{name: SysKernelSlack, kernelSlack: true})
	}
	if slices.Contains(o.Peers, "cold") {
		out = append(out, system{name: SysOursCold, exp: experiments.Set{NoWarmUp: true}})
	}
	if slices.Contains(o.Peers, "lazy-free") {
		out = append(out, system{name: SysLazyFree, lazyFree: true})
	}
	if slices.Contains(o.Peers, "small-pages") {
		out = append(out, system{name: SysSmallPages, pages: "small"})
	}
	if slices.Contains(o.Peers, "huge-pages") {
		out = append(out, system{name: SysHugePages, pages: "huge"})
	}
	if slices.Contains(o.Peers, "naive") {
		out = append(out, system{name: SysNaive, exp: experiments.Set{Naive: true}})
	}
	if slices.Contains(o.Peers, "actor") {
		out = append(out, system{name: SysActorRTT, floor: true})
	}
	if slices.Contains(o.Peers, "data") {
		out = append(out, system{name: SysDataRTT, floor: true, dataPlane: true})
	}
	if slices.Contains(o.Peers, "echo") {
		out = append(out, system{name: SysEchoRTT, peer: "echo"})
	}
	if slices.Contains(o.Peers, "mpi") {
		out = append(out, system{name: SysMPIDefault, peer: "mpi", alg: "default"}, system{name: SysMPIBest, peer: "mpi", alg: "best"})
	}
	if slices.Contains(o.Peers, "dask") {
		out = append(out, system{name: SysDask, peer: "dask"})
	}
	if slices.Contains(o.Peers, "gloo") {
		out = append(out, system{name: SysGlooDefault, peer: "gloo", alg: "default"}, system{name: SysGlooBest, peer: "gloo", alg: "best"})
	}
	return out
}

// floorOp says why the actor-rtt floor has no counterpart of g ("" if it
// has one).
func floorOp(g group) string {
	switch g.scenario {
	case "p2p", "broadcast", "reduce", "gather":
		return ""
	}
	return "n/a: no round-trip pattern for " + g.scenario
}

// treeOp says why a system that forces the reduce tree has no
// counterpart of g ("" if it has one): a broadcast has no reduce tree
// (the failure scenario's broadcast group).
func treeOp(g group) string {
	if g.kind == "broadcast" {
		return "n/a: a broadcast has no reduce tree (--degree forces the reduce's)"
	}
	return ""
}

// reduced is how many sources a reduce group's Reduce reduces, and so
// how many positions its tree has: N, or N-1 in failure-reduce (one
// backup, which replaces the lost source).
func (g group) reduced(nodes int) int {
	if g.scenario == "failure-reduce" {
		return nodes - 1
	}
	return nodes
}

// peerOp is the peer script's --op for a group, or why the peer has none.
func peerOp(peer string, g group) (string, string) {
	if g.scenario == "degree" || g.scenario == "failure-broadcast" || g.scenario == "failure-reduce" {
		return "", "n/a: the peer has no " + g.scenario
	}
	if peer == "echo" {
		switch g.kind {
		case "p2p":
			return "p2p", ""
		case "broadcast":
			return "bcast", ""
		}
		return "", "n/a: the echo floor has the p2p and broadcast patterns only"
	}
	switch g.kind {
	case "p2p", "gather", "reduce":
		return g.kind, ""
	case "broadcast":
		return "bcast", ""
	case "async":
		return "reduce", ""
	case "allreduce":
		// Dask has no allreduce; MPI and Gloo do.
		if peer == "mpi" || peer == "gloo" {
			return "allreduce", ""
		}
	}
	return "", "n/a: the " + peer + " peer has no " + g.kind
}
