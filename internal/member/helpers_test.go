package member

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

func randomBytes(seed uint64, n int) []byte { return testutil.RandomBytes(seed, n) }

// quietLog keeps test output readable; warnings still show.
// HOPLITE_TEST_LOG=debug (or any logrus level) shows more when replaying
// a failing seed.
func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	if v := os.Getenv("HOPLITE_TEST_LOG"); v != "" {
		if lvl, err := logrus.ParseLevel(v); err == nil {
			l.SetLevel(lvl)
		}
	}
	return l
}

func start(t *testing.T, cfg Config) *Local {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = quietLog()
	}
	l, err := StartLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

// idOwnedBy returns an id (prefix-k) whose directory shard the running
// member i hosts, so that a Reduce of that target is coordinated there.
// It asks the member, not the nominal placement (idOnNode): a member that
// had to retry its port under load joins as a new incarnation
// (node-1#1), which moves the placement.
func idOwnedBy(t *testing.T, l *Local, i int, prefix string) string {
	t.Helper()
	for k := range 10000 {
		if id := prefix + "-" + strconv.Itoa(k); l.Member(i).ShardOwner(id) == l.Member(i).ID() {
			return id
		}
	}
	t.Fatalf("node-%d hosts no directory shard", i)
	return ""
}

func deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, d, what, cond)
}

// senderOf returns who each receiver fetched from, per the shard's records.
func senderOf(info *messages.ObjectInfo) map[string]string { return testutil.SenderOf(info) }

// checkBroadcastTree asserts from the shard's transfer records that the
// copies form a tree rooted at root and that no sender served two
// receivers at once.
func checkBroadcastTree(t *testing.T, info *messages.ObjectInfo, root string, receivers int) {
	t.Helper()
	parent := map[string]string{}
	trs := info.GetTransfers()
	for _, tr := range trs {
		if tr.GetEndSeq() == 0 || tr.GetAborted() {
			t.Fatalf("transfer %v did not finish cleanly", tr)
		}
		if _, dup := parent[tr.GetReceiver()]; dup {
			t.Fatalf("%s received twice", tr.GetReceiver())
		}
		parent[tr.GetReceiver()] = tr.GetSender()
		for _, o := range trs {
			if o != tr && o.GetSender() == tr.GetSender() && o.GetStartSeq() < tr.GetEndSeq() && tr.GetStartSeq() < o.GetEndSeq() {
				t.Fatalf("%s served %s and %s at the same time", tr.GetSender(), tr.GetReceiver(), o.GetReceiver())
			}
		}
	}
	if len(parent) != receivers {
		t.Fatalf("%d receivers recorded, want %d: %v", len(parent), receivers, parent)
	}
	for r := range parent {
		hops := 0
		for cur := r; cur != root; cur = parent[cur] {
			if hops++; hops > len(parent) || parent[cur] == "" {
				t.Fatalf("%s does not lead back to %s: %v", r, root, parent)
			}
		}
	}
}

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

// lockedBuffer is a log sink that tests may read while actors write.
type lockedBuffer = testutil.SyncBuffer

// sendIn sends msg to pid from the actor system pid lives in: test
// messages (crash markers) are not protobuf and cannot cross Proto.Actor
// remote from the application's system to a member's.
func sendIn(l *Local, pid *actor.PID, msg any) {
	if i := l.NodeOf(pid.GetAddress()); i >= 0 {
		l.Member(i).System().Root.Send(freshPID(pid), msg)
	}
}

// nodeIndexOf is the node index of a member id of the embedded cluster
// (node-3, or node-3#1 for its second incarnation), or -1.
func nodeIndexOf(id string) int {
	var i int
	if _, err := fmt.Sscanf(id, "node-%d", &i); err != nil {
		return -1
	}
	return i
}

// settledInfo is the directory's record of id once no transfer is in
// flight: a receiver reports a finished transfer to the shard on its own
// path, after its Get returned (across members, that report can come
// later than the caller's next request).
func settledInfo(t *testing.T, ctx context.Context, cl *storenode.Client, id string) *messages.ObjectInfo {
	t.Helper()
	var info *messages.ObjectInfo
	eventually(t, 10*time.Second, "the transfers of "+id+" to be recorded finished", func() bool {
		var err error
		if info, err = cl.Info(ctx, id, false); err != nil {
			return false
		}
		for _, tr := range info.GetTransfers() {
			if tr.GetEndSeq() == 0 && !tr.GetAborted() {
				return false
			}
		}
		return true
	})
	return info
}

// systemOf is the actor system of the member (alive or killed) whose
// address pid has, or the application's.
func systemOf(l *Local, pid *actor.PID) *actor.ActorSystem {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.members {
		if m != nil && m.Address() == pid.GetAddress() {
			return m.System()
		}
	}
	return l.app
}

// reduceResult is the end of a Reduce or AllReduce that a test runs in
// the background.
type reduceResult struct {
	reply *messages.ReduceReply
	err   error
}

// goReduce runs call (a client's Reduce or AllReduce) in the background
// with d of ctx's time; its end comes on the channel returned.
func goReduce(ctx context.Context, d time.Duration, call func(context.Context) (*messages.ReduceReply, error)) <-chan reduceResult {
	done := make(chan reduceResult, 1)
	go func() {
		rctx, cancel := contextWithTimeout(ctx, d)
		defer cancel()
		r, err := call(rctx)
		done <- reduceResult{r, err}
	}()
	return done
}
