package transport

import (
	"net"
	"time"
)

// KeepAlive is the TCP keep-alive of the connections a member holds open
// while idle: the data plane's here, its actor remote's and its health
// checks' (internal/member). Go's default probes an idle connection
// every 15 s, and a member holds one to every member its actors ever
// wrote to and to each peer it keeps warm: those probes were most of an
// idle member's packets, and grew with N (docs/operations.md). Finding a
// dead peer is not theirs to do: the membership's checks and a stream's
// stall timeout find one in seconds. Left to them is keeping a
// middlebox's state for an idle connection (a NAT's or a load
// balancer's, commonly 350 s or more) and, as a backstop, ending a
// connection whose peer vanished: a probe after 2 minutes of idleness,
// then every 30 s, the fourth unanswered ends it.
var KeepAlive = net.KeepAliveConfig{Enable: true, Idle: 2 * time.Minute, Interval: 30 * time.Second, Count: 4}
