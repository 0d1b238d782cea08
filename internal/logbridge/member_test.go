package logbridge

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
)

// recorded is a slog.Handler at Debug that keeps every record it gets.
type recorded struct {
	mu    sync.Mutex
	min   slog.Level
	lines []string
}

func (r *recorded) Enabled(_ context.Context, l slog.Level) bool { return l >= r.min }

func (r *recorded) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec.Level.String()+" "+rec.Message)
	return nil
}

func (r *recorded) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorded) WithGroup(string) slog.Handler      { return r }

// A member's Proto.Actor records: info comes at debug, the errors of a
// cluster whose members come and go at debug, and any other warning once
// per text (and message type) within the throttle's five seconds.
func TestMemberLoggerDemotesAndThrottles(t *testing.T) {
	h := &recorded{min: slog.LevelDebug}
	log := MemberLoggerTo(h, "node-0")
	log.Info("Started Activator")
	log.Error("EndpointWriter failed to connect", "address", "127.0.0.1:1")
	for range 3 {
		log.Warn("mailbox full", "type", "*messages.Get")
	}
	log.Warn("mailbox full", "type", "*messages.Put")
	log.Error("something else broke")
	want := []string{
		"DEBUG Started Activator",
		"DEBUG EndpointWriter failed to connect",
		"WARN mailbox full",
		"WARN mailbox full",
		"ERROR something else broke",
	}
	if !slices.Equal(h.lines, want) {
		t.Fatalf("records:\n%q\nwant\n%q", h.lines, want)
	}

	// A handler at Warn drops what was demoted and keeps the rest.
	quiet := &recorded{min: slog.LevelWarn}
	log = MemberLoggerTo(quiet, "node-1")
	log.Info("Started Activator")
	log.Error("Failure reaching nodes")
	log.Error("something else broke")
	if want := []string{"ERROR something else broke"}; !slices.Equal(quiet.lines, want) {
		t.Fatalf("records at Warn: %q, want %q", quiet.lines, want)
	}
}
