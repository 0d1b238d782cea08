package member

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// A library's defaults: an embedded cluster logs only what needs the
// application's attention, its Stop is no failure of anyone, and its
// logs can go to the application's own slog handler.

// failureLines are the messages of the failure path (and of a shard
// rebuilt after it): none belongs in an orderly stop or leave.
var failureLines = []string{
	"member unreachable: spreading a failure notice",
	"member left the topology: spreading a failure notice",
	"directory shard rebuilt from the store nodes",
	"member failed",
	"node failed",
}

// useCluster is the README's embedded example: a Put, Gets on other
// nodes and a Reduce of one source per node.
func useCluster(t *testing.T, l *Local) {
	t.Helper()
	ctx := deadline(t, 20*time.Second)
	data := randomBytes(7, 1<<20)
	if err := l.Client(0).Put(ctx, "weights", data); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{1, l.Nodes() - 1} {
		if got, err := l.Client(i).Get(ctx, "weights"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get on node %d: %d bytes, %v", i, len(got), err)
		}
	}
	var ids []string
	for i := range l.Nodes() {
		id := "g" + string(rune('0'+i))
		ids = append(ids, id)
		if err := storenode.PutNumbers(ctx, l.Client(i), id, []float32{1, 2, 3, 4}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Client(0).Reduce(ctx, "grad-sum", ids, len(ids), messages.ReduceOp_SUM, messages.DType_FLOAT32); err != nil {
		t.Fatal(err)
	}
	sum, err := storenode.GetNumbers[float32](ctx, l.Client(1), "grad-sum")
	if n := float32(l.Nodes()); err != nil || !slices.Equal(sum, []float32{n, 2 * n, 3 * n, 4 * n}) {
		t.Fatalf("reduce: %v, %v", sum, err)
	}
}

// quietChild names the environment variable that makes
// TestEmbeddedClusterIsQuietByDefault the child process it runs.
const quietChild = "HOPLITE_TEST_QUIET_CHILD"

// TestEmbeddedClusterIsQuietByDefault: an embedded cluster given no
// logger writes nothing on stderr while it starts, serves Puts, Gets and
// a Reduce and stops (it logs at warn, and none of that is a warning).
// The cluster runs in a child process (this test binary again), whose
// stderr is the cluster's alone.
func TestEmbeddedClusterIsQuietByDefault(t *testing.T) {
	if os.Getenv(quietChild) == "1" {
		l, err := StartLocal(Config{Nodes: 8})
		if err != nil {
			t.Fatal(err)
		}
		useCluster(t, l)
		l.Stop()
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestEmbeddedClusterIsQuietByDefault$", "-test.count=1")
	cmd.Env = append(os.Environ(), quietChild+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if lines := strings.Count(stderr.String(), "\n"); lines > 0 {
		t.Fatalf("%d lines on stderr, want none:\n%s", lines, stderr.String())
	}
}

// slogRecorder is an slog.Handler that keeps every record, at every level.
type slogRecorder struct {
	mu      sync.Mutex
	records []recorded
	attrs   []slog.Attr
}

type recorded struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (r *slogRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *slogRecorder) Handle(_ context.Context, rec slog.Record) error {
	e := recorded{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	for _, a := range r.attrs {
		e.attrs[a.Key] = a.Value.String()
	}
	rec.Attrs(func(a slog.Attr) bool {
		e.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, e)
	return nil
}

func (r *slogRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recorderWith{r: r, attrs: attrs}
}

func (r *slogRecorder) WithGroup(string) slog.Handler { return r }

// recorderWith is a slogRecorder's handler with attributes: the records go to
// the one recorder.
type recorderWith struct {
	r     *slogRecorder
	attrs []slog.Attr
}

func (s *recorderWith) Enabled(ctx context.Context, l slog.Level) bool { return s.r.Enabled(ctx, l) }
func (s *recorderWith) Handle(ctx context.Context, rec slog.Record) error {
	rec = rec.Clone()
	rec.AddAttrs(s.attrs...)
	return s.r.Handle(ctx, rec)
}
func (s *recorderWith) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recorderWith{r: s.r, attrs: append(slices.Clip(s.attrs), attrs...)}
}
func (s *recorderWith) WithGroup(string) slog.Handler { return s }

func (r *slogRecorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records)
}

// TestLoggerReceivesHopliteAndProtoActor: Config.Logger gets Hoplite's
// records (with their fields) and Proto.Actor's (lib=Proto.Actor), down
// to debug when its handler asks for it; and even at debug a Stop of the
// whole cluster says nothing of failures, departures or rebuilt shards.
func TestLoggerReceivesHopliteAndProtoActor(t *testing.T) {
	rec := &slogRecorder{}
	l, err := StartLocal(Config{Nodes: 3, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	useCluster(t, l)
	started := len(rec.all())
	l.Stop()
	var hoplite, joined, protoActor bool
	for _, r := range rec.all() {
		switch {
		case r.msg == "embedded cluster started" && r.level == slog.LevelInfo && r.attrs["nodes"] == "3":
			hoplite = true
		case r.msg == "member joined the cluster" && r.attrs["member"] != "":
			joined = true
		case r.attrs["lib"] == "Proto.Actor":
			protoActor = true
		}
	}
	if !hoplite || !joined || !protoActor {
		t.Fatalf("records: Hoplite's %v, a member's %v, Proto.Actor's %v; want all three", hoplite, joined, protoActor)
	}
	for _, r := range rec.all()[started:] {
		for _, f := range append(failureLines, "member left the cluster", "member leaving: moving its shards") {
			if r.msg == f {
				t.Errorf("Stop logged %q %v", r.msg, r.attrs)
			}
		}
	}
}

// TestLogAndLoggerTogetherIsAnError: one logger, not two.
func TestLogAndLoggerTogetherIsAnError(t *testing.T) {
	_, err := StartLocal(Config{Nodes: 1, Log: quietLog(), Logger: slog.New(&slogRecorder{})})
	if !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("StartLocal with Log and Logger: %v, want INVALID_ARGUMENT", err)
	}
	slots, _ := memberSlots(t, 1)
	_, err = Join(context.Background(), MemberConfig{Bind: slots[0].bind, Log: quietLog(), Logger: slog.New(&slogRecorder{})})
	if !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("Join with Log and Logger: %v, want INVALID_ARGUMENT", err)
	}
}

// hookedLogger is a logger at debug whose entries a test reads.
func hookedLogger(t *testing.T) (*logrus.Logger, *logtest.Hook) {
	log := testLogger(t, logrus.DebugLevel)
	return log, logtest.NewLocal(log)
}

// entriesOf are the hook's entries logged by member id.
func entriesOf(hook *logtest.Hook, id string) []logrus.Entry {
	var out []logrus.Entry
	for _, e := range hook.AllEntries() {
		if e.Data["member"] == id {
			out = append(out, *e)
		}
	}
	return out
}

// logged reports whether member id logged msg.
func logged(hook *logtest.Hook, id, msg string) bool {
	for _, e := range entriesOf(hook, id) {
		if e.Message == msg {
			return true
		}
	}
	return false
}

// TestMemberStopIsALeave: Stop on one member of a running cluster is an
// orderly leave. The others move its shards (moved, not rebuilt), the
// object only it held fails at once with LOST, the one another member
// holds stays; and nobody spreads a failure notice, publishes NodeFailed
// or logs a failure.
func TestMemberStopIsALeave(t *testing.T) {
	log, hook := hookedLogger(t)
	ms := joinMembers(t, 3, log)
	var evs []*eventLog
	for _, m := range ms[:2] {
		evs = append(evs, recordEventsOf(t, m.System()))
	}
	ctx := deadline(t, 30*time.Second)
	only, shared := randomBytes(1, 300<<10), randomBytes(2, 300<<10)
	leaver := ms[2]
	if err := leaver.Client().Put(ctx, "only", only); err != nil {
		t.Fatal(err)
	}
	if err := ms[0].Client().Put(ctx, "shared", shared); err != nil {
		t.Fatal(err)
	}
	if got, err := leaver.Client().Get(ctx, "shared"); err != nil || !bytes.Equal(got, shared) {
		t.Fatalf("get shared on the leaver: %v", err)
	}

	leaver.Stop()
	for _, m := range ms[:2] {
		eventually(t, 20*time.Second, m.ID()+" sees the leaver gone", func() bool {
			return logged(hook, m.ID(), "member left the cluster") && !slices.Contains(m.liveIDs(), leaver.ID())
		})
	}
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := ms[1].Client().Get(gctx, "only"); !errors.Is(err, messages.ErrLost) {
		t.Fatalf("Get of the object only the leaver held: %v, want LOST before the deadline", err)
	}
	if got, err := ms[1].Client().Get(ctx, "shared"); err != nil || !bytes.Equal(got, shared) {
		t.Fatalf("get shared after the leave: %v", err)
	}
	for i, m := range ms[:2] {
		if !logged(hook, m.ID(), "member leaving: moving its shards") {
			t.Errorf("%s did not hear of the leave", m.ID())
		}
		for _, e := range entriesOf(hook, m.ID()) {
			if slices.Contains(failureLines, e.Message) {
				t.Errorf("%s logged %q %v", m.ID(), e.Message, e.Data)
			}
		}
		if f := eventsOf[*events.NodeFailed](evs[i]); len(f) > 0 {
			t.Errorf("%s published NodeFailed %+v", m.ID(), f)
		}
		if r := eventsOf[*events.ShardRebuilt](evs[i]); len(r) > 0 {
			t.Errorf("%s rebuilt shards %+v", m.ID(), r)
		}
	}
}

// TestLastMemberLeavesAtOnceAndCountsItsObjectsLost: a member with no
// live peer hands nothing off: its Leave returns at once with every
// object it held lost (the one copied from a member that left before
// included), and it tries to give up no copy.
func TestLastMemberLeavesAtOnceAndCountsItsObjectsLost(t *testing.T) {
	log, hook := hookedLogger(t)
	ms := joinMembers(t, 2, log)
	first, last := ms[0], ms[1]
	ctx := deadline(t, 30*time.Second)
	if err := first.Client().Put(ctx, "copied", randomBytes(3, 200<<10)); err != nil {
		t.Fatal(err)
	}
	if _, err := last.Client().Get(ctx, "copied"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"big", "small"} {
		if err := last.Client().Put(ctx, id, randomBytes(4, map[string]int{"big": 1 << 20, "small": 100}[id])); err != nil {
			t.Fatal(err)
		}
	}
	first.Stop()
	eventually(t, 20*time.Second, "the last member sees the first gone", func() bool {
		return logged(hook, last.ID(), "member left the cluster")
	})

	lost, err := last.Leave(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"big", "copied", "small"}; !slices.Equal(lost, want) {
		t.Fatalf("lost %v, want %v", lost, want)
	}
	if ctx.Err() != nil {
		t.Fatal("the leave ran into its deadline")
	}
	for _, e := range entriesOf(hook, last.ID()) {
		if e.Message == "leave: could not give up a copy" {
			t.Fatalf("the last member tried to give up a copy: %v", e.Data)
		}
	}
	var final *logrus.Entry
	for _, e := range entriesOf(hook, last.ID()) {
		if e.Message == "member leaving the cluster" {
			final = &e
		}
	}
	if final == nil || final.Data["lost_objects"] != 3 {
		t.Fatalf("final log line %v, want lost_objects=3", final)
	}
	select {
	case <-last.Done():
	default:
		t.Fatal("Leave returned before the member stopped")
	}
}
