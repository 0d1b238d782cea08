package logbridge

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
)

// recorder is an slog.Handler that keeps the records it is given.
type recorder struct {
	mu      sync.Mutex
	min     slog.Level
	records []slog.Record
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= r.min }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, rec.Clone())
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func attrs(rec slog.Record) map[string]any {
	out := map[string]any{}
	rec.Attrs(func(a slog.Attr) bool {
		out[a.Key] = a.Value.Any()
		return true
	})
	return out
}

// TestNewLoggerForwardsToTheHandler: entries at or above the handler's
// level arrive as records with their level, message and fields (an error
// as an error); lower ones do not, and the logger's own level is the
// handler's.
func TestNewLoggerForwardsToTheHandler(t *testing.T) {
	rec := &recorder{min: slog.LevelInfo}
	l := NewLogger(rec)
	if l.GetLevel() != logrus.InfoLevel {
		t.Fatalf("logger level %v, want info (the handler's)", l.GetLevel())
	}
	boom := errors.New("boom")
	l.WithField("member", "node-1").Debug("not wanted")
	l.WithFields(logrus.Fields{"member": "node-1", "n": 3}).Info("member joined")
	l.WithError(boom).Warn("could not")
	l.Error("bad")
	if len(rec.records) != 3 {
		t.Fatalf("%d records, want 3: %v", len(rec.records), rec.records)
	}
	want := []struct {
		level slog.Level
		msg   string
	}{{slog.LevelInfo, "member joined"}, {slog.LevelWarn, "could not"}, {slog.LevelError, "bad"}}
	for i, w := range want {
		if r := rec.records[i]; r.Level != w.level || r.Message != w.msg {
			t.Errorf("record %d: %v %q, want %v %q", i, r.Level, r.Message, w.level, w.msg)
		}
	}
	if a := attrs(rec.records[0]); a["member"] != "node-1" || a["n"] != int64(3) {
		t.Errorf("fields %v, want member=node-1 n=3", a)
	}
	if a := attrs(rec.records[1]); a[logrus.ErrorKey] != boom {
		t.Errorf("fields %v, want the error under %q", a, logrus.ErrorKey)
	}
}

// TestNewLoggerWarnHandler: a handler that wants warnings only makes a
// logger at warn.
func TestNewLoggerWarnHandler(t *testing.T) {
	rec := &recorder{min: slog.LevelWarn}
	l := NewLogger(rec)
	if l.GetLevel() != logrus.WarnLevel || l.IsLevelEnabled(logrus.InfoLevel) {
		t.Fatalf("logger level %v, want warn", l.GetLevel())
	}
	l.Info("quiet")
	l.Warn("said")
	if len(rec.records) != 1 || rec.records[0].Message != "said" {
		t.Fatalf("records %v, want only the warning", rec.records)
	}
}
