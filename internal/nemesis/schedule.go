// Package nemesis draws a network nemesis's schedule from a seed and
// builds the ip and tc command lines that apply and heal its faults on
// hosts that are Linux network namespaces (one member each, a veth into a
// bridge). It is a pure core: it runs nothing and reads no clock, so a
// seed's schedule and commands are the same on every machine and a
// failing seed replays.
//
// The faults need only iproute2 and the kernel's htb, pfifo and u32
// (no netem, iptables or nftables, which minimal kernels leave out): a
// host's egress has an htb root whose default class passes everything;
// a u32 filter sends the packets it matches to a class that drops them
// (a pfifo of limit 0), to a narrow class (a bandwidth drop, whose queue
// delays them) or, for a sample of them, to a narrow lane beside the
// default class (those are delayed and overtaken: reordering). A
// sample is the packets whose IP header checksum has its low k bits
// zero, about 1 in 2^k and different for every packet and each
// retransmission.
package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kind is a fault the nemesis injects.
type Kind int

const (
	// Partition cuts Members off from the other members both ways.
	Partition Kind = iota
	// OneWay drops what Members send to the other members (Inbound: what
	// the others send to Members) and lets the other direction pass.
	OneWay
	// Loss drops a sample (1 in 2^Bits) of what Members send.
	Loss
	// Reorder sends a sample (1 in 2^Bits) of what Members send through a
	// lane of Rate: those packets are delayed and overtaken.
	Reorder
	// Slow limits what Members send to Rate; the queue delays it.
	Slow
	// Pause stops Members' processes (SIGSTOP) until the fault heals
	// (SIGCONT).
	Pause
	// Kill kills Members' processes (SIGKILL) and starts them again, as
	// new incarnations with empty stores, when the fault heals.
	Kill
)

func (k Kind) String() string {
	switch k {
	case Partition:
		return "partition"
	case OneWay:
		return "one-way partition"
	case Loss:
		return "loss"
	case Reorder:
		return "reorder"
	case Slow:
		return "bandwidth drop"
	case Pause:
		return "pause"
	case Kill:
		return "kill"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Network reports whether the fault is applied with tc (else it is a
// signal to the member's process).
func (k Kind) Network() bool { return k != Pause && k != Kill }

// Fault is one fault of a schedule: it begins At after the run's start
// and heals For later.
type Fault struct {
	Kind    Kind
	Members []int // the hosts it acts on (sorted)
	Inbound bool  // OneWay: the others' packets to Members are dropped
	Bits    int   // Loss, Reorder: a sample of 1 in 2^Bits packets
	Rate    string
	At, For time.Duration
}

func (f Fault) String() string {
	s := fmt.Sprintf("%s of %v at %v for %v", f.Kind, f.Members, f.At, f.For)
	switch f.Kind {
	case OneWay:
		if f.Inbound {
			s += " (inbound)"
		} else {
			s += " (outbound)"
		}
	case Loss:
		s += fmt.Sprintf(" (1 in %d)", 1<<f.Bits)
	case Reorder:
		s += fmt.Sprintf(" (1 in %d through %s)", 1<<f.Bits, f.Rate)
	case Slow:
		s += " (" + f.Rate + ")"
	}
	return s
}

// Plan bounds a schedule.
type Plan struct {
	Hosts int           // members, one per host (at least 2)
	Span  time.Duration // every fault heals by then
	// Longest is the longest a fault holds; Gap the longest quiet time
	// between two faults (each is drawn from a quarter of it up).
	Longest, Gap time.Duration
}

// Schedule draws the faults of seed: one after another with quiet gaps
// (so each is seen alone), each on fewer than half of the hosts (a
// majority keeps running), every one healed by p.Span.
func Schedule(seed uint64, p Plan) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	if p.Hosts < 2 || p.Longest <= 0 || p.Span <= p.Longest {
		return nil
	}
	draw := func(d time.Duration) time.Duration {
		lo := max(d/4, time.Millisecond)
		return lo + time.Duration(rng.Int64N(int64(d-lo)+1))
	}
	var out []Fault
	at := draw(p.Gap)
	for {
		f := Fault{Kind: Kind(rng.IntN(int(Kill) + 1)), At: at, For: draw(p.Longest)}
		if f.At+f.For > p.Span {
			return out
		}
		n := 1
		if minority := (p.Hosts - 1) / 2; minority > 1 {
			n += rng.IntN(minority)
		}
		f.Members = rng.Perm(p.Hosts)[:n]
		slices.Sort(f.Members)
		switch f.Kind {
		case OneWay:
			f.Inbound = rng.IntN(2) == 0
		case Loss:
			f.Bits = 2 + rng.IntN(3) // 1 in 4, 8 or 16
		case Reorder:
			f.Bits = 1 + rng.IntN(2) // 1 in 2 or 4
			f.Rate = []string{"2mbit", "8mbit"}[rng.IntN(2)]
		case Slow:
			f.Rate = []string{"512kbit", "2mbit", "10mbit"}[rng.IntN(3)]
		}
		out = append(out, f)
		at = f.At + f.For + draw(p.Gap)
	}
}

// Describe is a schedule in one line per fault.
func Describe(fs []Fault) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.String())
		b.WriteByte('\n')
	}
	return b.String()
}
