// Package loopback chooses free 127.0.0.1 ports for processes a command
// or a test starts.
package loopback

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports returns n loopback ports nothing listened on a moment ago, below
// the kernel's ephemeral range: a port from that range can be taken as the
// source port of any outgoing connection between the moment it is chosen
// and the moment a member binds it ("address already in use"). A port is
// never handed out twice in one process. Another process may still bind a
// port first, so a caller that starts a listener on one retries on
// EADDRINUSE.
func Ports(n int) ([]int, error) {
	lo, hi := 20000, ephemeralLow()
	if hi-lo < 1000 {
		lo = 1024 // a kernel configured with a wide ephemeral range
	}
	mu.Lock()
	defer mu.Unlock()
	var out []int
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n {
			return nil, fmt.Errorf("no %d free loopback ports in [%d, %d)", n, lo, hi)
		}
		port := lo + rand.IntN(hi-lo)
		if given[port] {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // in use
		}
		ln.Close()
		given[port] = true
		out = append(out, port)
	}
	return out, nil
}

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default where it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil || v <= 1024 {
		return 32768
	}
	return v
}
