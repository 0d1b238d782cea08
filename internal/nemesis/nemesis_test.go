package nemesis

import (
	"slices"
	"strings"
	"testing"
	"time"
)

var plan = Plan{Hosts: 5, Span: 40 * time.Second, Longest: 4 * time.Second, Gap: 2 * time.Second}

// A seed's schedule is the same every time, another seed's differs, and
// every fault heals within the span, on a minority of the hosts, one
// after another.
func TestScheduleIsTheSeeds(t *testing.T) {
	a, b := Schedule(7, plan), Schedule(7, plan)
	if len(a) == 0 || !slices.EqualFunc(a, b, func(x, y Fault) bool { return x.String() == y.String() }) {
		t.Fatalf("seed 7 drew\n%s\nthen\n%s", Describe(a), Describe(b))
	}
	if Describe(Schedule(8, plan)) == Describe(a) {
		t.Fatal("seeds 7 and 8 drew the same schedule")
	}
	kinds := map[Kind]bool{}
	for seed := range uint64(200) {
		var end time.Duration
		for _, f := range Schedule(seed, plan) {
			kinds[f.Kind] = true
			if f.At < end || f.For <= 0 || f.For > plan.Longest || f.At+f.For > plan.Span {
				t.Fatalf("seed %d: %v after a fault that ended at %v (span %v)", seed, f, end, plan.Span)
			}
			if n := len(f.Members); n < 1 || 2*n >= plan.Hosts || slices.ContainsFunc(f.Members, func(m int) bool { return m < 0 || m >= plan.Hosts }) {
				t.Fatalf("seed %d: %v acts on no minority of %d hosts", seed, f, plan.Hosts)
			}
			end = f.At + f.For
		}
	}
	if len(kinds) != int(Kill)+1 {
		t.Fatalf("200 seeds drew only %v", kinds)
	}
	if Schedule(1, Plan{Hosts: 1, Span: time.Minute, Longest: time.Second}) != nil {
		t.Fatal("a schedule for one host")
	}
}

func lines(cmds []Cmd) string {
	var out []string
	for _, c := range cmds {
		out = append(out, strings.Join(c, " "))
	}
	return strings.Join(out, "\n")
}

// A two-way partition of host 1 from 0 and 2 drops both directions of
// each pair at the sender; a one-way one only the direction asked; loss
// and reordering take a sample by the IP checksum's low bits.
func TestApply(t *testing.T) {
	b := Bed{Prefix: "hpn7", Net: 7, Hosts: 3}
	if err := b.Check(); err != nil {
		t.Fatal(err)
	}
	got := lines(b.Apply(Fault{Kind: Partition, Members: []int{1}}))
	want := strings.Join([]string{
		"tc -n hpn7-h1 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.7.1/32 flowid 1:2",
		"tc -n hpn7-h0 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.7.2/32 flowid 1:2",
		"tc -n hpn7-h1 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.7.3/32 flowid 1:2",
		"tc -n hpn7-h2 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.7.2/32 flowid 1:2",
	}, "\n")
	if got != want {
		t.Fatalf("partition:\n%s\nwant\n%s", got, want)
	}
	got = lines(b.Apply(Fault{Kind: OneWay, Members: []int{0}, Inbound: true}))
	if want := "tc -n hpn7-h1 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.7.1/32 flowid 1:2\n" +
		"tc -n hpn7-h2 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.7.1/32 flowid 1:2"; got != want {
		t.Fatalf("one-way inbound:\n%s\nwant\n%s", got, want)
	}
	got = lines(b.Apply(Fault{Kind: Loss, Members: []int{2}, Bits: 3}))
	if want := "tc -n hpn7-h2 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.7.0/24 match u16 0 0x0007 at 10 flowid 1:2"; got != want {
		t.Fatalf("loss:\n%s\nwant\n%s", got, want)
	}
	got = lines(b.Apply(Fault{Kind: Reorder, Members: []int{2}, Bits: 1, Rate: "2mbit"}))
	if want := "tc -n hpn7-h2 class change dev eth0 parent 1: classid 1:4 htb rate 2mbit\n" +
		"tc -n hpn7-h2 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 198.18.7.0/24 match u16 0 0x0001 at 10 flowid 1:4"; got != want {
		t.Fatalf("reorder:\n%s\nwant\n%s", got, want)
	}
	if cmds := b.Apply(Fault{Kind: Kill, Members: []int{0}}); len(cmds) != 0 {
		t.Fatalf("a kill applied %v", cmds)
	}
	if got := lines(b.Heal()); strings.Count(got, "filter del dev eth0 parent 1:") != 3 {
		t.Fatalf("heal:\n%s", got)
	}
	up := lines(b.Up())
	for _, w := range []string{"ip addr add 198.18.7.254/24 dev hpn7-br", "ip -n hpn7-h2 addr add 198.18.7.3/24 dev eth0",
		"tc -n hpn7-h0 qdisc add dev eth0 parent 1:2 handle 20: pfifo limit 0"} {
		if !strings.Contains(up, w) {
			t.Fatalf("up lacks %q:\n%s", w, up)
		}
	}
	for _, bad := range []Bed{{Prefix: "Bad", Hosts: 1}, {Prefix: "toolong1", Hosts: 1}, {Prefix: "ok", Net: 256, Hosts: 1}, {Prefix: "ok"}} {
		if bad.Check() == nil {
			t.Fatalf("%+v passed the check", bad)
		}
	}
}
