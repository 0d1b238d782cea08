// Package logbridge routes log/slog records into a logrus.Logger, so that
// libraries which log through slog (notably Proto.Actor) end up in the
// application's single logrus stream, with its formatter, hooks and level.
//
// [NewHandler] adapts a *logrus.Logger to [slog.Handler].
// [ActorSystemOption] makes an actor system log through it:
//
//	system := actor.NewActorSystem(logbridge.ActorSystemOption(log))
//
// Its lines carry lib=Proto.Actor and system=<id>, like those of Proto.Actor's
// default logger factory.
package logbridge

import (
	"context"
	"log/slog"
	"maps"
	"runtime"

	"github.com/sirupsen/logrus"
)

// handler is the slog.Handler returned by NewHandler. It is immutable: With*
// methods return new handlers and never modify fields after construction.
type handler struct {
	logger *logrus.Logger
	// fields holds the attributes added with WithAttrs, already flattened
	// (group names joined with ".") and resolved. Read-only once built.
	fields logrus.Fields
	// prefix is the dotted path of the groups opened with WithGroup, each
	// followed by ".", e.g. "req.user.". Empty when no group is open.
	prefix string
}

// NewHandler returns a slog.Handler that forwards every record to l.
//
// Levels map slog Debug/Info/Warn/Error to the logrus level of the same name;
// levels in between round down to the nearest of those, and levels below
// Debug map to Trace. Enabled consults l's current level, so records that
// logrus would drop cost no formatting. Attributes become logrus fields;
// groups are flattened to dotted keys ("group.key"). Values are resolved
// (slog.LogValuer) and passed to logrus as their Go values, and an error
// stored under the top-level key "err" or "error" is passed as an error value
// under logrus.ErrorKey. A zero record time is not forwarded (logrus then
// stamps the entry with the current time). When l.ReportCaller is set, the
// caller reported is the slog call site, not this package.
//
// A nil l means logrus.StandardLogger().
func NewHandler(l *logrus.Logger) slog.Handler {
	if l == nil {
		l = logrus.StandardLogger()
	}
	return &handler{logger: l}
}

// Enabled reports whether l's current level lets records of level through.
func (h *handler) Enabled(_ context.Context, level slog.Level) bool {
	return h.logger.IsLevelEnabled(logrusLevel(level))
}

// Handle forwards r to logrus as one entry.
func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	level := logrusLevel(r.Level)
	if !h.logger.IsLevelEnabled(level) {
		return nil
	}
	fields := make(logrus.Fields, len(h.fields)+r.NumAttrs())
	maps.Copy(fields, h.fields)
	r.Attrs(func(a slog.Attr) bool {
		addAttr(fields, h.prefix, a)
		return true
	})
	entry := &logrus.Entry{
		Logger:  h.logger,
		Data:    fields,
		Time:    r.Time, // zero: logrus uses time.Now()
		Context: ctx,
	}
	// Without this, logrus would report a frame inside this package.
	if r.PC != 0 && h.logger.ReportCaller {
		frame, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		entry.Caller = &frame
	}
	entry.Log(level, r.Message)
	return nil
}

// WithAttrs returns a handler whose records also carry attrs, qualified by
// the groups open on h.
func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	fields := make(logrus.Fields, len(h.fields)+len(attrs))
	maps.Copy(fields, h.fields)
	for _, a := range attrs {
		addAttr(fields, h.prefix, a)
	}
	return &handler{logger: h.logger, fields: fields, prefix: h.prefix}
}

// WithGroup returns a handler that qualifies all later attributes with name.
func (h *handler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &handler{logger: h.logger, fields: h.fields, prefix: h.prefix + name + "."}
}

// addAttr resolves a and stores it in fields under prefix+key, recursing into
// groups. It follows the slog.Handler rules: empty attrs and empty groups are
// dropped, and groups with an empty key are inlined.
func addAttr(fields logrus.Fields, prefix string, a slog.Attr) {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p = prefix + a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			addAttr(fields, p, ga)
		}
		return
	}
	key, val := prefix+a.Key, a.Value.Any()
	if prefix == "" && (a.Key == "err" || a.Key == logrus.ErrorKey) {
		if err, ok := val.(error); ok {
			key, val = logrus.ErrorKey, err
		}
	}
	fields[key] = val
}

// logrusLevel maps an slog level to the logrus level at or below it. It never
// returns Fatal or Panic, so a forwarded record cannot exit or panic.
func logrusLevel(l slog.Level) logrus.Level {
	switch {
	case l >= slog.LevelError:
		return logrus.ErrorLevel
	case l >= slog.LevelWarn:
		return logrus.WarnLevel
	case l >= slog.LevelInfo:
		return logrus.InfoLevel
	case l >= slog.LevelDebug:
		return logrus.DebugLevel
	default:
		return logrus.TraceLevel
	}
}
