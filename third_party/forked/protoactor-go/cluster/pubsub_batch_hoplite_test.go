package cluster

import "testing"

// Hoplite patch: a pubsub batch from a peer whose envelope names a type
// index past its type names is an error; upstream indexed with it (a
// panic in the endpoint reader, which ended the process).
func TestPubSubBatchWithABadTypeIndex(t *testing.T) {
	for _, id := range []int32{-1, 1, 7} {
		tr := &PubSubBatchTransport{TypeNames: []string{"hoplite.protoactor.actor.PID"}, Envelopes: []*PubSubEnvelope{{TypeId: id}}}
		if _, err := tr.Deserialize(); err == nil {
			t.Fatalf("type index %d of 1 decoded", id)
		}
	}
	tr := &PubSubBatchTransport{TypeNames: []string{"hoplite.protoactor.actor.PID"}, Envelopes: []*PubSubEnvelope{{TypeId: 0}}}
	if _, err := tr.Deserialize(); err != nil {
		t.Fatalf("a good batch: %v", err)
	}
}
