package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/liveview"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// memberRef finds what may name a member in a text: a member id, an
// actor of a member, an incarnation root, a data address, or a dotted
// incarnation ("node-1.1").
var memberRef = regexp.MustCompile(`[A-Za-z0-9_.:#/\-]*node[-#][A-Za-z0-9_.:#/\-]*`)

// namings checks that every member reference in the texts a surface
// shows is written as docs/operations.md says ("How members are named"):
// a member id the cluster had, or "<member id>/<actor>", or an embedded
// member's data address ("mem://<member id>"), or a notice's origin
// ("revoke:<member id>").
type namings struct {
	t     *testing.T
	known map[string]bool
}

func (n namings) check(surface, text string) {
	n.t.Helper()
	for _, ref := range memberRef.FindAllString(text, -1) {
		ref = strings.TrimPrefix(strings.TrimPrefix(ref, "revoke:"), "mem://")
		id, _, _ := strings.Cut(ref, "/")
		if strings.Contains(ref, "node#") || !n.known[id] {
			n.t.Errorf("%s names a member %q in %q: want a member id (%s) or <member id>/<actor>", surface, ref, text, n.ids())
		}
	}
}

func (n namings) ids() string {
	var ids []string
	for id := range n.known {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return strings.Join(ids, ", ")
}

// strs is every string in a decoded JSON value.
func strs(v any, out *[]string) {
	switch v := v.(type) {
	case string:
		*out = append(*out, v)
	case []any:
		for _, x := range v {
			strs(x, out)
		}
	case map[string]any:
		for k, x := range v {
			*out = append(*out, k)
			strs(x, out)
		}
	}
}

// failedSet is the sorted distinct members a surface reported failed.
type failedSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (f *failedSet) add(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids == nil {
		f.ids = map[string]bool{}
	}
	f.ids[id] = true
}

func (f *failedSet) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id := range f.ids {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// TestOneNamingOfMembers: an embedded cluster whose node 1 is killed,
// restarted and killed again names its members one way on every
// surface: the recovery events, `hoplite events`, `members`, `status` and
// `stat`,
// the logs, the live view's feed and state, and the error of a request
// to the dead store node. Each surface reports the same two failed
// members, node-1 and node-1#1.
func TestOneNamingOfMembers(t *testing.T) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	hook := logtest.NewLocal(log)
	l, err := cluster.StartLocal(cluster.Config{Nodes: 4, Log: log, UI: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n := namings{t: t, known: map[string]bool{}}
	for i := range l.Nodes() {
		n.known[l.Member(i).ID()] = true
	}

	// The application's events.
	var app failedSet
	var appTexts []string
	var appMu sync.Mutex
	sub := l.System().EventStream.Subscribe(func(e any) {
		var text string
		switch e := e.(type) {
		case *events.NodeFailed:
			app.add(e.Node)
			text = fmt.Sprintf("NodeFailed %s %s %s", e.Node, e.DetectedBy, e.Forwarder)
		case *events.ShardRebuilt:
			text = fmt.Sprintf("ShardRebuilt %s %s", e.Shard, e.Host)
		default:
			return
		}
		appMu.Lock()
		appTexts = append(appTexts, text)
		appMu.Unlock()
	})
	defer l.System().EventStream.Unsubscribe(sub)

	// `hoplite events` through a client of node 0.
	c, err := cluster.Dial(ctx, l.Member(0).Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	evs, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cli failedSet
	var cliOut bytes.Buffer
	var cliMu sync.Mutex
	go func() {
		for ev := range evs {
			var line bytes.Buffer
			if err := writeEvent(&line, ev); err != nil {
				return
			}
			if f := ev.GetNodeFailed(); f != nil && strings.Contains(line.String(), " node="+f.GetNode()+" ") {
				cli.add(f.GetNode())
			}
			cliMu.Lock()
			cliOut.Write(line.Bytes())
			cliMu.Unlock()
		}
	}()

	// The live view's feed.
	var live failedSet
	var liveTexts []string
	var liveMu sync.Mutex
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.UIAddr()+"/live/feed", nil)
	feed, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer feed.Body.Close()
	go func() {
		sc := bufio.NewScanner(feed.Body)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		var event string
		for sc.Scan() {
			line := sc.Text()
			if name, ok := strings.CutPrefix(line, "event: "); ok {
				event = name
				continue
			}
			payload, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			liveMu.Lock()
			liveTexts = append(liveTexts, payload)
			liveMu.Unlock()
			if event != "entries" {
				continue
			}
			var es []liveview.Entry
			if json.Unmarshal([]byte(payload), &es) != nil {
				continue
			}
			for _, e := range es {
				var f events.NodeFailed
				if e.Kind == "NodeFailed" && json.Unmarshal(e.Data, &f) == nil {
					live.add(f.Node)
				}
			}
		}
	}()

	// An object with copies on node-0 and node-2 (and a transfer between
	// them) for `hoplite stat`.
	if err := l.Client(0).Put(ctx, "named", bytes.Repeat([]byte("n"), 256<<10)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client(2).Get(ctx, "named"); err != nil {
		t.Fatal(err)
	}

	deadStore := l.StoreNode(1)
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	if err := l.Restart(1); err != nil {
		t.Fatal(err)
	}
	n.known[l.Member(1).ID()] = true
	if got := l.Member(1).ID(); got != "node-1#1" {
		t.Fatalf("node 1's second incarnation is %q, want node-1#1", got)
	}
	// Node 0 hears of node-1#1 before the kill, so a request to its
	// store can name it.
	deadStore2 := l.StoreNode(1)
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}

	want := []string{"node-1", "node-1#1"}
	waitSet := func(surface string, f *failedSet) {
		t.Helper()
		for !slices.Equal(f.list(), want) {
			select {
			case <-ctx.Done():
				t.Fatalf("%s reported the failures of %v, want %v", surface, f.list(), want)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitSet("the application's events", &app)
	waitSet("hoplite events", &cli)
	waitSet("the live view's feed", &live)

	// The logs: the failures they report, and every member they name.
	var logged failedSet
	for _, e := range hook.AllEntries() {
		if e.Data["lib"] == "Proto.Actor" {
			continue // Proto.Actor's own records name actors its way
		}
		text := e.Message
		for k, v := range e.Data {
			text += fmt.Sprintf(" %s=%v", k, v)
		}
		n.check("a log line", text)
		switch e.Message {
		case "failure notice delivered":
			logged.add(fmt.Sprint(e.Data["failed"]))
		case "node failed":
			logged.add(fmt.Sprint(e.Data["node"]))
		}
	}
	if got := logged.list(); !slices.Equal(got, want) {
		t.Errorf("the logs reported the failures of %v, want %v", got, want)
	}

	// `hoplite members` and `status`: the live members by id.
	var members, status bytes.Buffer
	if err := opMembers(ctx, c, nil, opsIO{stdout: &members}); err != nil {
		t.Fatal(err)
	}
	if err := opStatus(ctx, c, nil, opsIO{stdout: &status}); err != nil {
		t.Fatal(err)
	}
	n.check("hoplite members", members.String())
	n.check("hoplite status", status.String())
	var listed []string
	for _, line := range strings.Split(strings.TrimSpace(members.String()), "\n") {
		id, addr, _ := strings.Cut(line, "\t")
		listed = append(listed, id)
		if strings.Contains(addr, "node") {
			t.Errorf("hoplite members lists address %q for %s: want host:port", addr, id)
		}
	}
	if w := []string{"node-0", "node-2", "node-3"}; !slices.Equal(listed, w) {
		t.Errorf("hoplite members listed %v, want %v", listed, w)
	}
	for _, id := range listed {
		if !strings.Contains(status.String(), id+" ") {
			t.Errorf("hoplite status does not name %s:\n%s", id, status.String())
		}
	}
	var stat bytes.Buffer
	if err := opStat(ctx, c, []string{"named"}, opsIO{stdout: &stat}); err != nil {
		t.Fatal(err)
	}
	n.check("hoplite stat", stat.String())
	for _, id := range []string{"node-0", "node-2"} {
		if !strings.Contains(stat.String(), "\n"+id+" ") {
			t.Errorf("hoplite stat lists no copy on %s:\n%s", id, stat.String())
		}
	}

	// A request to each dead incarnation's store node names it
	// <member id>/store.
	for _, dead := range []struct {
		store *actor.PID
		id    string
	}{{deadStore, "node-1"}, {deadStore2, "node-1#1"}} {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := storenode.NewClient(l.Member(0).System().Root, dead.store, 10*time.Second).Get(rctx, "anything")
		rcancel()
		if !errors.Is(err, messages.ErrUnavailable) || !strings.Contains(err.Error(), dead.id+"/store") {
			t.Errorf("a Get from the store node of %s: %v, want UNAVAILABLE naming %s/store", dead.id, err, dead.id)
		}
		if err != nil {
			n.check("a request's error", err.Error())
		}
	}

	appMu.Lock()
	for _, s := range appTexts {
		n.check("an event", s)
	}
	appMu.Unlock()
	cliMu.Lock()
	n.check("hoplite events", cliOut.String())
	if !strings.Contains(cliOut.String(), "detected_by=") {
		t.Errorf("hoplite events printed no detected_by:\n%s", cliOut.String())
	}
	cliMu.Unlock()
	liveMu.Lock()
	for _, p := range liveTexts {
		var v any
		if json.Unmarshal([]byte(p), &v) != nil {
			continue
		}
		var ss []string
		strs(v, &ss)
		for _, s := range ss {
			n.check("the live view", s)
		}
	}
	liveMu.Unlock()
}
