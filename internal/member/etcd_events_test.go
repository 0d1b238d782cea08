package member

import (
	"encoding/json"
	"slices"
	"testing"

	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdEventsApplied: the provider follows the member list by the
// watch's events, not by reading it again: a put adds or replaces a
// member, a delete removes it, a key that is not a member's is dropped,
// and events a full read already holds (at or below its revision) change
// nothing, even a delete of a member that registered again since.
func TestEtcdEventsApplied(t *testing.T) {
	const prefix = "/hoplite/c/members/"
	put := func(id string, rev int64) *clientv3.Event {
		v, _ := json.Marshal(etcdEntry{ID: id, Host: "127.0.0.1", Port: int32(7000 + rev)})
		return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(prefix + id), Value: v, ModRevision: rev}}
	}
	del := func(id string, rev int64) *clientv3.Event {
		return &clientv3.Event{Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte(prefix + id), ModRevision: rev}}
	}
	ids := func(known map[string]*pcluster.Member) []string {
		var out []string
		for id := range known {
			out = append(out, id)
		}
		slices.Sort(out)
		return out
	}
	// As a full read at revision 10 found them: b re-registered at 9.
	known := map[string]*pcluster.Member{"a": {Id: "a"}, "b": {Id: "b", Port: 7009}}
	rev := applyEtcdEvents(known, 10, prefix, []*clientv3.Event{
		del("b", 8), put("b", 9), // in the read already
		put("c", 11), del("a", 12),
		{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(prefix + "d"), Value: []byte("{}"), ModRevision: 13}},
	})
	if got := ids(known); !slices.Equal(got, []string{"b", "c"}) || rev != 13 {
		t.Fatalf("after the events: members %v at revision %d, want [b c] at 13", got, rev)
	}
	if known["b"].Port != 7009 {
		t.Fatalf("b's entry is %+v: an event the read held replaced it", known["b"])
	}
	// A member's key rewritten with a value that is not a member's: it is
	// no longer a member, as a full read would find.
	rev = applyEtcdEvents(known, rev, prefix, []*clientv3.Event{
		{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(prefix + "c"), Value: []byte("not json"), ModRevision: 14}},
		put("e", 15),
	})
	if got := ids(known); !slices.Equal(got, []string{"b", "e"}) || rev != 15 {
		t.Fatalf("after a malformed put: members %v at revision %d, want [b e] at 15", got, rev)
	}
}
