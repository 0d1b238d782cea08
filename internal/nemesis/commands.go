package nemesis

import (
	"fmt"
	"regexp"
	"strconv"
)

// Bed names a testbed: hosts Prefix-h0.. (network namespaces) at
// 198.18.Net.1.., each with an eth0 whose peer Prefix-vI is a port of the
// bridge Prefix-br, which has 198.18.Net.254 in the root namespace (the
// driver's address). Distinct prefixes and nets let several beds exist
// at once.
type Bed struct {
	Prefix string
	Net    int
	Hosts  int
}

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,5}$`)

// Check says what is wrong with b's names, or nil.
func (b Bed) Check() error {
	switch {
	case !prefixRE.MatchString(b.Prefix):
		return fmt.Errorf("prefix %q: want 1-6 lowercase letters or digits, a letter first", b.Prefix)
	case b.Net < 0 || b.Net > 255:
		return fmt.Errorf("net %d: want 0..255", b.Net)
	case b.Hosts < 1 || b.Hosts > 200:
		return fmt.Errorf("%d hosts: want 1..200", b.Hosts)
	}
	return nil
}

// NS is host i's network namespace.
func (b Bed) NS(i int) string { return b.Prefix + "-h" + strconv.Itoa(i) }

// Addr is host i's address.
func (b Bed) Addr(i int) string { return fmt.Sprintf("198.18.%d.%d", b.Net, i+1) }

// Bridge is the bridge's name; BridgeAddr its address, the driver's.
func (b Bed) Bridge() string     { return b.Prefix + "-br" }
func (b Bed) BridgeAddr() string { return fmt.Sprintf("198.18.%d.254", b.Net) }

func (b Bed) subnet() string { return fmt.Sprintf("198.18.%d.0/24", b.Net) }

// Cmd is one command line, the program first.
type Cmd []string

// The classes of a host's egress htb.
const (
	classPass    = "1:1" // the default: everything passes
	classDrop    = "1:2" // a pfifo of limit 0: everything is dropped
	classSlow    = "1:3" // a bandwidth drop
	classReorder = "1:4" // the narrow lane a sample is reordered through
	fullRate     = "10gbit"
)

// Up builds the bed: the bridge, then each host with its veth, address
// and the egress classes its faults use.
func (b Bed) Up() []Cmd {
	br := b.Bridge()
	cmds := []Cmd{
		{"ip", "link", "add", br, "type", "bridge"},
		{"ip", "addr", "add", b.BridgeAddr() + "/24", "dev", br},
		{"ip", "link", "set", br, "up"},
	}
	for i := range b.Hosts {
		ns, v := b.NS(i), b.Prefix+"-v"+strconv.Itoa(i)
		cmds = append(cmds,
			Cmd{"ip", "netns", "add", ns},
			Cmd{"ip", "link", "add", v, "type", "veth", "peer", "name", "eth0", "netns", ns},
			Cmd{"ip", "link", "set", v, "master", br, "up"},
			Cmd{"ip", "-n", ns, "link", "set", "lo", "up"},
			Cmd{"ip", "-n", ns, "addr", "add", b.Addr(i) + "/24", "dev", "eth0"},
			Cmd{"ip", "-n", ns, "link", "set", "eth0", "up"},
			b.tc(i, "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "1"),
		)
		for _, c := range []string{classPass, classDrop, classSlow, classReorder} {
			cmds = append(cmds, b.tc(i, "class", "add", "dev", "eth0", "parent", "1:", "classid", c, "htb", "rate", fullRate))
		}
		cmds = append(cmds, b.tc(i, "qdisc", "add", "dev", "eth0", "parent", classDrop, "handle", "20:", "pfifo", "limit", "0"))
	}
	return cmds
}

func (b Bed) tc(host int, args ...string) Cmd {
	return append(Cmd{"tc", "-n", b.NS(host)}, args...)
}

// filter sends host's packets to dst (an address or a subnet) to class,
// only a sample of 1 in 2^bits of them if bits > 0.
func (b Bed) filter(host int, dst string, bits int, class string) Cmd {
	c := b.tc(host, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip", "dst", dst)
	if bits > 0 {
		c = append(c, "match", "u16", "0", fmt.Sprintf("0x%04x", 1<<bits-1), "at", "10")
	}
	return append(c, "flowid", class)
}

func (b Bed) rate(host int, class, rate string) Cmd {
	return b.tc(host, "class", "change", "dev", "eth0", "parent", "1:", "classid", class, "htb", "rate", rate)
}

// Apply is the commands that inject a network fault (none for a Pause or
// a Kill, which are signals).
func (b Bed) Apply(f Fault) []Cmd {
	in := func(h int) bool {
		for _, m := range f.Members {
			if m == h {
				return true
			}
		}
		return false
	}
	var cmds []Cmd
	cut := func(from, to int) { cmds = append(cmds, b.filter(from, b.Addr(to)+"/32", 0, classDrop)) }
	for _, m := range f.Members {
		switch f.Kind {
		case Partition, OneWay:
			for o := range b.Hosts {
				if in(o) {
					continue
				}
				if f.Kind == Partition || !f.Inbound {
					cut(m, o)
				}
				if f.Kind == Partition || f.Inbound {
					cut(o, m)
				}
			}
		case Loss:
			cmds = append(cmds, b.filter(m, b.subnet(), f.Bits, classDrop))
		case Reorder:
			cmds = append(cmds, b.rate(m, classReorder, f.Rate), b.filter(m, b.subnet(), f.Bits, classReorder))
		case Slow:
			cmds = append(cmds, b.rate(m, classSlow, f.Rate), b.filter(m, b.subnet(), 0, classSlow))
		}
	}
	return cmds
}

// Heal is the commands that remove every filter from the hosts, which
// heals every network fault (the classes stay, unused).
func (b Bed) Heal() []Cmd {
	var cmds []Cmd
	for i := range b.Hosts {
		cmds = append(cmds, b.tc(i, "filter", "del", "dev", "eth0", "parent", "1:"))
	}
	return cmds
}

// Exec is the command line that runs argv inside host i's namespace.
func (b Bed) Exec(i int, argv ...string) Cmd {
	return append(Cmd{"ip", "netns", "exec", b.NS(i)}, argv...)
}
