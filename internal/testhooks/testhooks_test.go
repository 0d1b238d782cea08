package testhooks_test

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/testhooks"
)

// In reaches the Set of both configurations, and nothing else's.
func TestInReachesTheConfigurations(t *testing.T) {
	var mc cluster.MemberConfig
	testhooks.In(&mc).ProbeDelay = time.Second
	if testhooks.In(&mc).ProbeDelay != time.Second {
		t.Error("MemberConfig: the delay set through In is not there")
	}
	var lc cluster.Config
	testhooks.In(&lc).ProtocolVersion = 3
	if testhooks.In(&lc).ProtocolVersion != 3 {
		t.Error("Config: the version set through In is not there")
	}
	if s := testhooks.In(mc); s != nil {
		t.Errorf("In of a MemberConfig value (not a pointer): %+v, want nil", s)
	}
	if s := testhooks.In(&struct{}{}); s != nil {
		t.Errorf("In of another type: %+v, want nil", s)
	}
}

// The production configurations export no fault-injection point: no
// field of a function type, none named as a hook of Set is, none of
// Set's or its Store's type.
func TestProductionConfigsHoldNoHooks(t *testing.T) {
	set := reflect.TypeFor[testhooks.Set]()
	forbidden := map[string]bool{"Hooks": true}
	hookTypes := map[reflect.Type]bool{set: true}
	for f := range set.Fields() {
		forbidden[f.Name], forbidden[f.Name+"Hook"] = true, true
		if f.Type.Kind() == reflect.Struct {
			hookTypes[f.Type] = true
		}
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[cluster.MemberConfig](), reflect.TypeFor[cluster.Config]()} {
		exported := 0
		for f := range typ.Fields() {
			if !f.IsExported() {
				continue
			}
			exported++
			switch {
			case forbidden[f.Name]:
				t.Errorf("%v has the test hook %s: it belongs in testhooks.Set", typ, f.Name)
			case f.Type.Kind() == reflect.Func:
				t.Errorf("%v.%s is a function: a hook belongs in testhooks.Set", typ, f.Name)
			case hookTypes[f.Type]:
				t.Errorf("%v.%s is an exported %v", typ, f.Name, f.Type)
			}
		}
		if exported < 5 {
			t.Errorf("%v: only %d exported fields: is this the configuration?", typ, exported)
		}
	}
}

// Hooks set through In run in the members: a shard's before the
// messages of a Put, the store node's before each chunk it fetches for
// a Get on another member.
func TestHooksReachTheMembers(t *testing.T) {
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	cfg := cluster.Config{Nodes: 2, ChunkSize: 64 << 10, Log: log}
	var chunks, shardMsgs atomic.Int64
	h := testhooks.In(&cfg)
	h.Store.BeforeFetchChunk = func(node, id string, _ int64) {
		if node == "node-1" && id == "hooked" {
			chunks.Add(1)
		}
	}
	h.Shard = func(string, any) { shardMsgs.Add(1) }
	l, err := cluster.StartLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	shard := shardMsgs.Load()
	if err := l.Client(0).Put(ctx, "hooked", make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	if shardMsgs.Load() == shard {
		t.Error("no shard hook ran for the Put")
	}
	if _, err := l.Client(1).Get(ctx, "hooked"); err != nil {
		t.Fatal(err)
	}
	if n := chunks.Load(); n < 4 {
		t.Errorf("the fetch hook ran for %d chunks of the object on node-1, want at least its 4", n)
	}
}
