// Command memberlist-probe is one member of a hashicorp/memberlist
// cluster (SWIM with Lifeguard, as Consul, Nomad and Serf run it) at its
// default LAN settings: the membership Hoplite's own is measured against
// on the same testbed (cluster/processtest, BenchmarkScaleMemberlist).
//
// It prints one line per event on standard output, each starting with
// the Unix time in nanoseconds: "start NAME", "join NAME" and "leave
// NAME" as its member list changes, and "converged" once it lists -n
// members (again after it listed fewer).
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

type events struct {
	mu sync.Mutex
}

func (e *events) print(what string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Printf("%d %s\n", time.Now().UnixNano(), what)
}

func (e *events) NotifyJoin(n *memberlist.Node)   { e.print("join " + n.Name) }
func (e *events) NotifyLeave(n *memberlist.Node)  { e.print("leave " + n.Name) }
func (e *events) NotifyUpdate(n *memberlist.Node) {}

func main() {
	bind := flag.String("bind", "", "host:port to bind and advertise")
	seeds := flag.String("seeds", "", "comma-separated host:port of members to join")
	n := flag.Int("n", 0, "members expected: print converged once listing them")
	flag.Parse()
	host, portText, err := net.SplitHostPort(*bind)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || *n <= 0 {
		fmt.Fprintln(os.Stderr, "usage: memberlist-probe -bind host:port -seeds a,b -n N")
		os.Exit(2)
	}
	ev := &events{}
	cfg := memberlist.DefaultLANConfig()
	cfg.Name = *bind
	cfg.BindAddr, cfg.BindPort = host, port
	cfg.AdvertiseAddr, cfg.AdvertisePort = host, port
	cfg.Events = ev
	cfg.LogOutput = io.Discard
	list, err := memberlist.Create(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memberlist:", err)
		os.Exit(1)
	}
	ev.print("start " + *bind)
	var others []string
	for _, s := range strings.Split(*seeds, ",") {
		if s != "" && s != *bind {
			others = append(others, s)
		}
	}
	// Seeds start at about the same time: retry until one answers, as
	// Hoplite's members keep asking theirs.
	for deadline := time.Now().Add(2 * time.Minute); len(others) > 0; time.Sleep(200 * time.Millisecond) {
		if k, _ := list.Join(others); k > 0 || time.Now().After(deadline) {
			break
		}
	}
	converged := false
	for range time.Tick(20 * time.Millisecond) {
		all := list.NumMembers() >= *n
		if all && !converged {
			ev.print("converged")
		}
		converged = all
	}
}
