package storeactor

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// Config is what a store node needs. The cluster package fills it in.
type Config struct {
	// Self names this node; its DataAddress is filled in by Serve.
	Self *messages.NodeRef
	// Store holds the bytes; it outlives restarts of the actor.
	Store *objstore.Store
	// ShardFor returns the directory shard that owns an object id.
	ShardFor func(id string) *actor.PID
	// Transport moves object bytes between nodes.
	Transport transport.Transport
	// Locate carries the fetches' Locates to their shards (nil: as actor
	// messages, which is what a node outside a cluster has).
	Locate Locator
	// Create carries the fast Puts' CreateObjects to their shards (nil:
	// as actor requests).
	Create Creator
	// Delete carries the Deletes' DeleteObjects to shards on other
	// members (nil: as actor requests).
	Delete Deleter

	// ChunkSize is the unit of copying, streaming and progress. 0 adapts
	// it to the bandwidth the Estimator measured (plan.ChunkFor: about
	// 5 ms of transfer per chunk, plan.UnmeasuredChunk until something is
	// measured); a fixed size is used as given.
	ChunkSize int
	// InlineLimit: objects smaller than this are kept inline in the
	// directory and need no transfer (default 64 KiB).
	InlineLimit int64
	// MaxObjectIDLen bounds object ids (default 1024 bytes).
	MaxObjectIDLen int
	// DefaultTimeout applies to requests that carry no timeout (default 30s).
	DefaultTimeout time.Duration
	// StallTimeout abandons a transfer that makes no progress for this
	// long and looks for another sender (default 10s).
	StallTimeout time.Duration
	// HandoverWait bounds how long a Republish from another member's
	// table waits for the hand-over of the table of that shard still on
	// this member (default 5 s, stretched by Stretch; see handover.go).
	HandoverWait time.Duration
	// Stretch lengthens the stall timeout by the process's recent
	// scheduling delay (internal/lag), so that a transfer on a busy
	// machine is not abandoned for being slow; nil keeps it fixed.
	Stretch func(time.Duration) time.Duration
	// Estimator receives measured transfer bandwidth and control latency
	// (the L and B of the reduce cost model); nil disables measuring.
	Estimator *estimator.Estimator
	// MaxRemoteReply bounds the bytes a Get's reply carries to a
	// requester in another actor system: that reply is one Proto.Actor
	// remote message, which the remote caps, and one past the cap was
	// dropped on its way and left the requester waiting. Past it the Get
	// fails INVALID_ARGUMENT naming the bound, at once. 0: no bound.
	MaxRemoteReply int
	// Hooks let tests and fault injection act at chosen points.
	Hooks Hooks
	// Log is where this node logs.
	Log *logrus.Entry

	adaptChunk bool // ChunkSize was 0: follow the measured bandwidth
}

// streamChunk is the chunk size for a transfer of an object of size
// bytes starting now. A node that has measured nothing yet still cuts the
// object into plan.MinChunksPerObject chunks: the reader picks the chunk
// of a stream, and one unmeasured reader with whole-object chunks turns
// every hop above it in a chain into store-and-forward (a 1 MiB Reduce of
// 8 took 90 ms instead of about 40: positions above a leaf-only member
// got their first byte only when their child had finished).
func (c *Config) streamChunk(size int64) int { return c.sharedStreamChunk(size, 1, 0) }

// sharedStreamChunk is streamChunk for one of streams streams that share
// the link (a sliced AllReduce's 2(n−1)): about 5 ms of its share, not of
// the whole link. A chain's fill costs one chunk of that share per hop,
// so 256 KiB chunks, right for one stream, cost a sliced AllReduce of 8
// seven hops of 70 ms. B > 0 is the bandwidth to use (the coordinator's,
// with which it paces the streams), else this node's measurement.
func (c *Config) sharedStreamChunk(size int64, streams int, B float64) int {
	if !c.adaptChunk {
		return c.ChunkSize
	}
	if !(B > 0) {
		B = 0 // not measured: ChunkFor's default, c.ChunkSize
		if _, b, _, n := c.Estimator.Estimate(); n > 0 {
			B = b
		}
	}
	return plan.ChunkForObject(B/float64(max(streams, 1)), size)
}

// treeChunk is own, the chunk this node would read a stream in, capped
// by shard, the chunk the object's directory shard chose for the depth of
// the broadcast tree the stream is an edge of (LocateReply.chunk, 0 for
// none): a deep tree's every level waits for a chunk. Never under
// plan.MinPipelineChunk, whatever a peer asks (its chunk's own CPU). A
// node configured with a fixed ChunkSize keeps it.
func (c *Config) treeChunk(own int, shard int64) int {
	if !c.adaptChunk || shard <= 0 || shard >= int64(own) {
		return own
	}
	return int(max(shard, plan.MinPipelineChunk))
}

// Hooks are called at points where tests and fault injection need to act.
// They run on the copying goroutine: a hook that blocks stalls that copy.
type Hooks struct {
	// BeforePutChunk runs before a Put copies the chunk at off into the store.
	BeforePutChunk func(node, id string, off int64)
	// BeforeFetchChunk runs before a fetched chunk at off is stored.
	BeforeFetchChunk func(node, id string, off int64)
	// BeforeReduceChunk runs before a reduce task reads the chunk at off
	// of its input id: in a tree or chain position its own source (a
	// chain's offsets are the source's, within its slice), once per
	// chunk it combines; in a gather position each slice's chain output.
	// A hook that sleeps makes a Reduce or AllReduce last long enough
	// for a test to act inside it.
	BeforeReduceChunk func(node, id string, off int64)
	// AroundReduceOutput, if set, runs a reduce run's creation of its
	// position's output on the run's goroutine: it must call create once
	// (which returns the creation's error). A hook that blocks before
	// create holds the run as a worker scheduled late on a loaded machine
	// is; one that acts after it knows the attempt is over.
	AroundReduceOutput func(node string, task *messages.ReduceTask, create func() error)
	// BeforeReceive runs in the store node actor before each message; a
	// hook that panics crashes the actor, which its supervisor restarts.
	BeforeReceive func(node string, msg any)
}

// The defaults of Config's MaxObjectIDLen and DefaultTimeout, shared by
// anything that answers a store node's requests in its place.
const (
	DefaultMaxObjectIDLen = 1024
	DefaultRequestTimeout = 30 * time.Second
)

func (c *Config) withDefaults() *Config {
	d := *c
	if d.ChunkSize <= 0 {
		d.ChunkSize, d.adaptChunk = 1<<20, d.Estimator != nil
	}
	if d.InlineLimit == 0 {
		d.InlineLimit = 64 << 10
	}
	if d.MaxObjectIDLen <= 0 {
		d.MaxObjectIDLen = DefaultMaxObjectIDLen
	}
	if d.DefaultTimeout <= 0 {
		d.DefaultTimeout = DefaultRequestTimeout
	}
	if d.StallTimeout <= 0 {
		d.StallTimeout = 10 * time.Second
	}
	if d.HandoverWait <= 0 {
		d.HandoverWait = DefaultHandoverWait
	}
	if d.Log == nil {
		d.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	d.Log = d.Log.WithField("node", d.Self.GetNodeId())
	return &d
}

// timeout turns a request's timeout_ms into a duration, 0 meaning default
// (at most directory.MaxTimeout).
func (c *Config) timeout(ms int64) time.Duration {
	return directory.Timeout(ms, c.DefaultTimeout)
}

// handoverWait is HandoverWait as of now, stretched as the stall
// timeout is: a former host's goroutines that run late stop its table
// late.
func (c *Config) handoverWait() time.Duration {
	if c.Stretch == nil {
		return c.HandoverWait
	}
	return c.Stretch(c.HandoverWait)
}

// stall is the stall timeout as of now: StallTimeout, stretched.
func (c *Config) stall() time.Duration {
	if c.Stretch == nil {
		return c.StallTimeout
	}
	return c.Stretch(c.StallTimeout)
}
