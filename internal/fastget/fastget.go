// Package fastget is what a Client and its store node in the same
// process share for the fast paths of a Get and a Put of an inline
// object: the node registers a Getter and a Putter under its PID, and a
// Client of that PID asks them before sending the node a Get or a Put.
// None of it crosses a process, and none of it is part of package
// storenode's API.
package fastget

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Getter serves a Get on its caller's goroutine when the object's
// directory shard answers with the bytes. ok false means it did not (the
// object is on its node already or being fetched there, the shard
// answered otherwise, or the call failed): the caller sends the node its
// ordinary Get, which is answered as if the fast path had not been
// tried. ctx must have a deadline.
type Getter interface {
	Get(ctx context.Context, id string, readOnly bool) (data []byte, ok bool)
}

// getters are the registered Getters by their node's actorutil.Key: one
// per running store node in this process.
var getters sync.Map

// Register makes g the Getter of the store node pid (replacing one a
// previous incarnation registered).
func Register(pid *actor.PID, g Getter) { getters.Store(actorutil.Key(pid), g) }

// Unregister removes g, if it is still pid's Getter.
func Unregister(pid *actor.PID, g Getter) { getters.CompareAndDelete(actorutil.Key(pid), g) }

// Lookup is the Getter of the store node pid, or nil if none runs in
// this process.
func Lookup(pid *actor.PID) Getter {
	if pid == nil {
		return nil
	}
	g, _ := getters.Load(actorutil.Key(pid))
	if g == nil {
		return nil
	}
	return g.(Getter)
}

// answered counts the Gets the fast path answered in this process.
var answered atomic.Uint64

// NoteAnswered counts one Get the fast path answered.
func NoteAnswered() { answered.Add(1) }

// Answered is how many Gets the fast path answered in this process: the
// tests that prove its ordering check that they ran on it.
func Answered() uint64 { return answered.Load() }

// Putter serves a Put of an inline object on its caller's goroutine:
// the caller makes the creator copy, registers it with the object's
// directory shard itself and stores the bytes. ok false means it did
// not start (the node holds or fetches a copy of the id already, the
// object is not inline, or the node is not serving): the caller sends
// the node its ordinary Put, which is answered as if the fast path had
// not been tried. With ok true, err is the Put's answer. ctx must have
// a deadline.
type Putter interface {
	Put(ctx context.Context, id string, data []byte) (ok bool, err error)
}

// putters are the registered Putters by their node's actorutil.Key.
var putters sync.Map

// RegisterPutter makes p the Putter of the store node pid.
func RegisterPutter(pid *actor.PID, p Putter) { putters.Store(actorutil.Key(pid), p) }

// UnregisterPutter removes p, if it is still pid's Putter.
func UnregisterPutter(pid *actor.PID, p Putter) { putters.CompareAndDelete(actorutil.Key(pid), p) }

// LookupPutter is the Putter of the store node pid, or nil if none runs
// in this process.
func LookupPutter(pid *actor.PID) Putter {
	if pid == nil {
		return nil
	}
	p, _ := putters.Load(actorutil.Key(pid))
	if p == nil {
		return nil
	}
	return p.(Putter)
}

// putsAnswered counts the Puts the fast path answered in this process.
var putsAnswered atomic.Uint64

// NotePutAnswered counts one Put the fast path answered.
func NotePutAnswered() { putsAnswered.Add(1) }

// PutsAnswered is how many Puts the fast path answered in this process.
func PutsAnswered() uint64 { return putsAnswered.Load() }
