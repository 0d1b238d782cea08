package remote

import (
	"sync"
	"testing"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Hoplite patch: a connect whose endpoint supervisor is gone (a node
// shutting down) leaves no endpoint; Get, the callers and removeEndpoint
// then drop the message instead of panicking outside any actor, and the
// failed connect is not kept, so the next message tries again.
func TestEndpointWhoseConnectFailed(t *testing.T) {
	system := actor.NewActorSystem()
	em := &endpointManager{connections: &sync.Map{}, remote: &Remote{actorSystem: system}}
	em.endpointSupervisor = system.NewLocalPID("no-such-supervisor")
	if ep := em.ensureConnected("198.18.0.1:1"); ep != nil {
		t.Fatalf("an endpoint from a supervisor that is gone: %v", ep)
	}
	if _, kept := em.connections.Load("198.18.0.1:1"); kept {
		t.Fatal("the failed connect was kept: the address could never connect again")
	}
	// A lazy endpoint whose connect failed, still listed (it failed
	// between the Load and the CompareAndDelete of another caller).
	le := NewEndpointLazy(em, "198.18.0.2:1")
	em.connections.Store("198.18.0.2:1", le)
	if ep := le.Get(); ep != nil {
		t.Fatalf("Get after a failed connect: %v", ep)
	}
	em.removeEndpoint(&EndpointTerminatedEvent{Address: "198.18.0.2:1"})
	em.remoteWatch(&remoteWatch{Watcher: system.NewLocalPID("w"), Watchee: actor.NewPID("198.18.0.3:1", "x")})
	em.remoteDeliver(&remoteDeliver{target: actor.NewPID("198.18.0.4:1", "x"), message: "hello"})
}
