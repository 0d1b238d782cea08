package cluster

import (
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
)

// A remote whose port is taken fails with an error that says so
// (errors.Is EADDRINUSE: the embedded cluster retries on another port).
func TestRemotePortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	system := actor.NewActorSystem()
	err = startRemote(remote.NewRemote(system, remoteConfig("127.0.0.1", port)))
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("start a remote on a taken port: %v, want EADDRINUSE", err)
	}
}
