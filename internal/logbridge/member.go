package logbridge

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// MemberLogger is the *slog.Logger a member's actor system logs through:
// Proto.Actor's records go to l (NewHandler), but a member
// runs Proto.Actor's cluster and remote, which are chatty, so:
//   - Info and below become Debug (topology dumps, endpoint starts);
//   - the errors that are normal in a cluster whose members come and go
//     (a seed that is not up yet, a connection to a member that died)
//     become Debug: our own log says what failed, once;
//   - other warnings and errors are kept, at most one per message text
//     every 5 seconds.
func MemberLogger(l *logrus.Logger, memberID string) *slog.Logger {
	return MemberLoggerTo(NewHandler(l), memberID)
}

// MemberLoggerTo is MemberLogger for records that go to h.
func MemberLoggerTo(h slog.Handler, systemID string) *slog.Logger {
	f := &memberLogFilter{inner: h, throttle: &logThrottle{last: map[string]time.Time{}}}
	return slog.New(f).With("lib", "Proto.Actor", "system", systemID)
}

// expectedErrors are prefixes of Proto.Actor messages that describe the
// normal life of a cluster (members starting, leaving, failing).
var expectedErrors = []string{
	"Bad connection to the node health status",
	"Failure reaching nodes",
	"Couldn't request node health status",
	"Bad response from the node health status",
	"EndpointWriter failed to connect",
	"EndpointWriter failed to create receive stream",
	"EndpointWriter lost connection",
	"EndpointWatcher receive message for already terminated endpoint",
	"EndpointReader failed to send disconnection message",
	"Automanaged server stopping",
	"EndpointWriter failed to send connect request",
	"EndpointWriter failed to receive connect response",
	"remote no longer exists",
	"Could not get a response from Gossip",
	"Gossip could not send gossip request",
	"sendGossipForMember failed",
	"failed to stop gossip actor",
	"Failed to get gossip state",
}

type logThrottle struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (t *logThrottle) allow(msg string, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.last[msg]; ok && now.Sub(last) < 5*time.Second {
		return false
	}
	if len(t.last) > 1024 { // bounded: forget everything rather than grow
		clear(t.last)
	}
	t.last[msg] = now
	return true
}

type memberLogFilter struct {
	inner    slog.Handler
	throttle *logThrottle
}

func (f *memberLogFilter) level(l slog.Level, msg string) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	for _, p := range expectedErrors {
		if strings.HasPrefix(msg, p) {
			return slog.LevelDebug
		}
	}
	return l
}

func (f *memberLogFilter) Enabled(ctx context.Context, l slog.Level) bool {
	if l < slog.LevelWarn {
		l = slog.LevelDebug
	}
	// Warnings may still be demoted by their text: ask for Debug too.
	return f.inner.Enabled(ctx, l) || f.inner.Enabled(ctx, slog.LevelDebug)
}

func (f *memberLogFilter) Handle(ctx context.Context, r slog.Record) error {
	l := f.level(r.Level, r.Message)
	if !f.inner.Enabled(ctx, l) {
		return nil
	}
	if l >= slog.LevelWarn && !f.throttle.allow(throttleKey(r), time.Now()) {
		return nil
	}
	if l != r.Level {
		c := slog.NewRecord(r.Time, l, r.Message, r.PC)
		r.Attrs(func(a slog.Attr) bool {
			c.AddAttrs(a)
			return true
		})
		r = c
	}
	return f.inner.Handle(ctx, r)
}

// throttleKey is what makes two log records the same for the throttle:
// the text and the message type a record names (a flood of one dropped
// message type is one line; different types are different lines).
func throttleKey(r slog.Record) string {
	key := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "type" {
			key += "\x00" + a.Value.String()
			return false
		}
		return true
	})
	return key
}

func (f *memberLogFilter) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &memberLogFilter{inner: f.inner.WithAttrs(attrs), throttle: f.throttle}
}

func (f *memberLogFilter) WithGroup(name string) slog.Handler {
	return &memberLogFilter{inner: f.inner.WithGroup(name), throttle: f.throttle}
}
