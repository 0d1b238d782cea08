package logbridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/slogtest"
	"time"

	"github.com/sirupsen/logrus"
	logrustest "github.com/sirupsen/logrus/hooks/test"
)

// syncBuffer is a bytes.Buffer safe for a logger writing from other
// goroutines while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newLogger returns a JSON logrus logger at level writing to the returned buffer.
func newLogger(level logrus.Level) (*logrus.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	l := logrus.New()
	l.SetOutput(buf)
	l.SetFormatter(&logrus.JSONFormatter{})
	l.SetLevel(level)
	return l, buf
}

// lines parses every JSON line written to buf.
func lines(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func onlyLine(t *testing.T, buf *syncBuffer) map[string]any {
	t.Helper()
	ls := lines(t, buf)
	if len(ls) != 1 {
		t.Fatalf("got %d lines, want 1:\n%s", len(ls), buf.String())
	}
	return ls[0]
}

func TestLevelMapping(t *testing.T) {
	tests := []struct {
		in   slog.Level
		want string
	}{
		{slog.LevelDebug - 4, "trace"},
		{slog.LevelDebug - 1, "trace"},
		{slog.LevelDebug, "debug"},
		{slog.LevelDebug + 3, "debug"},
		{slog.LevelInfo, "info"},
		{slog.LevelInfo + 2, "info"},
		{slog.LevelWarn, "warning"},
		{slog.LevelWarn + 1, "warning"},
		{slog.LevelError, "error"},
		{slog.LevelError + 8, "error"}, // never Fatal/Panic
	}
	for _, tt := range tests {
		l, buf := newLogger(logrus.TraceLevel)
		slog.New(NewHandler(l)).Log(context.Background(), tt.in, "m")
		if got := onlyLine(t, buf)["level"]; got != tt.want {
			t.Errorf("slog level %v: logrus level %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestLevelFiltering(t *testing.T) {
	l, buf := newLogger(logrus.WarnLevel)
	h := NewHandler(l)
	ctx := context.Background()
	for lvl, want := range map[slog.Level]bool{
		slog.LevelDebug - 4: false, slog.LevelDebug: false, slog.LevelInfo: false,
		slog.LevelInfo + 3: false, slog.LevelWarn: true, slog.LevelError: true,
	} {
		if got := h.Enabled(ctx, lvl); got != want {
			t.Errorf("Enabled(%v) = %v, want %v", lvl, got, want)
		}
	}

	sl := slog.New(h)
	sl.Debug("dropped-debug")
	sl.Info("dropped-info")
	// Handle itself filters too, for callers that skip Enabled.
	if err := h.Handle(ctx, slog.NewRecord(time.Now(), slog.LevelInfo, "dropped-direct", 0)); err != nil {
		t.Fatal(err)
	}
	sl.Warn("kept")
	if m := onlyLine(t, buf); m["msg"] != "kept" {
		t.Errorf("got %v, want only the Warn record", m)
	}

	// The handler follows later level changes on the logrus logger.
	l.SetLevel(logrus.TraceLevel)
	if !h.Enabled(ctx, slog.LevelDebug-4) {
		t.Error("Enabled(Debug-4) = false after SetLevel(Trace)")
	}
}

type userValuer struct{ name string }

func (u userValuer) LogValue() slog.Value {
	return slog.GroupValue(slog.String("name", u.name), slog.Bool("admin", false))
}

func TestAttributesAndGroups(t *testing.T) {
	l, buf := newLogger(logrus.InfoLevel)
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	sl := slog.New(NewHandler(l)).
		With("svc", "api").
		WithGroup("req").
		With("id", 7)
	sl.Info("hello",
		"path", "/a",
		slog.Group("user", slog.Any("who", userValuer{"bob"})),
		slog.Duration("took", 1500*time.Millisecond),
		slog.Time("at", when),
		slog.Group("", "inline", true),
		slog.Group("empty"),
	)
	m := onlyLine(t, buf)
	want := map[string]any{
		"msg":                "hello",
		"level":              "info",
		"svc":                "api",
		"req.id":             float64(7),
		"req.path":           "/a",
		"req.user.who.name":  "bob",
		"req.user.who.admin": false,
		"req.took":           float64(1500 * time.Millisecond),
		"req.at":             when.Format(time.RFC3339Nano),
		"req.inline":         true,
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %#v, want %#v", k, m[k], v)
		}
	}
	if len(m) != len(want)+1 { // +1: time
		t.Errorf("unexpected extra fields in %v", m)
	}
}

func TestRecordTime(t *testing.T) {
	l, buf := newLogger(logrus.InfoLevel)
	when := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := NewHandler(l).Handle(context.Background(), slog.NewRecord(when, slog.LevelInfo, "m", 0)); err != nil {
		t.Fatal(err)
	}
	got, err := time.Parse(time.RFC3339, onlyLine(t, buf)["time"].(string))
	if err != nil || !got.Equal(when) {
		t.Errorf("time = %v (%v), want %v", got, err, when)
	}
}

func TestErrors(t *testing.T) {
	l := logrus.New()
	l.SetOutput(&bytes.Buffer{})
	hook := logrustest.NewLocal(l)
	sl := slog.New(NewHandler(l))
	boom := errors.New("boom")

	for _, key := range []string{"err", "error"} {
		hook.Reset()
		sl.Error("failed", key, boom)
		data := hook.LastEntry().Data
		if got, ok := data[logrus.ErrorKey].(error); !ok || !errors.Is(got, boom) {
			t.Errorf("key %q: Data[%q] = %#v, want the error value", key, logrus.ErrorKey, data[logrus.ErrorKey])
		}
		if key == "err" {
			if _, ok := data["err"]; ok {
				t.Errorf(`key "err" kept alongside %q: %v`, logrus.ErrorKey, data)
			}
		}
	}

	// Non-error values under "err", and errors inside groups, stay put.
	hook.Reset()
	sl.With("err", "text").WithGroup("g").Error("failed", "err", boom)
	data := hook.LastEntry().Data
	if data["err"] != "text" {
		t.Errorf(`Data["err"] = %#v, want "text"`, data["err"])
	}
	if got, ok := data["g.err"].(error); !ok || !errors.Is(got, boom) {
		t.Errorf(`Data["g.err"] = %#v, want the error value`, data["g.err"])
	}
	if _, ok := data[logrus.ErrorKey]; ok {
		t.Errorf("unexpected %q field: %v", logrus.ErrorKey, data)
	}
}

func TestReportCaller(t *testing.T) {
	l, buf := newLogger(logrus.InfoLevel)
	l.SetReportCaller(true)
	slog.New(NewHandler(l)).Info("here")
	m := onlyLine(t, buf)
	if file, _ := m["file"].(string); !strings.Contains(file, "handler_test.go") {
		t.Errorf("file = %q, want the slog call site in handler_test.go", file)
	}
	if fn, _ := m["func"].(string); !strings.HasSuffix(fn, ".TestReportCaller") {
		t.Errorf("func = %q, want TestReportCaller", fn)
	}
}

func TestSystemLogger(t *testing.T) {
	l, buf := newLogger(logrus.InfoLevel)
	SystemLogger(l, "sys-1").Info("started", "id", "sys-1")
	m := onlyLine(t, buf)
	if m["lib"] != "Proto.Actor" || m["system"] != "sys-1" || m["msg"] != "started" {
		t.Errorf("got %v, want lib=Proto.Actor system=sys-1 msg=started", m)
	}
}

// TestSlogtest runs the standard slog.Handler contract tests. The JSON output
// is un-flattened (dotted keys become nested maps), as slogtest expects
// groups as nested maps.
func TestSlogtest(t *testing.T) {
	var buf *syncBuffer
	slogtest.Run(t,
		func(t *testing.T) slog.Handler {
			var l *logrus.Logger
			l, buf = newLogger(logrus.InfoLevel)
			return NewHandler(l)
		},
		func(t *testing.T) map[string]any {
			m := onlyLine(t, buf)
			if strings.HasSuffix(t.Name(), "/zero-time") {
				// logrus stamps every entry, so "ignoring" a zero
				// Record.Time means not forwarding it: the stamp must be
				// the current time, not year 1. Then drop it, as
				// slogtest.TestHandler documents for output a handler
				// cannot avoid.
				ts, err := time.Parse(time.RFC3339, m["time"].(string))
				if err != nil || ts.Before(time.Now().Add(-time.Minute)) {
					t.Errorf("zero Record.Time forwarded: time=%v (%v)", m["time"], err)
				}
				delete(m, slog.TimeKey)
			}
			return unflatten(m)
		})
}

func unflatten(flat map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range flat {
		parts := strings.Split(k, ".")
		m := out
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]any)
			if !ok {
				sub = map[string]any{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = v
	}
	return out
}
