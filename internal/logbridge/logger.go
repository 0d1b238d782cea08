package logbridge

import (
	"context"
	"io"
	"log/slog"
	"slices"

	"github.com/sirupsen/logrus"
)

// NewLogger returns a *logrus.Logger whose entries go to h: the other
// direction of NewHandler, for code that logs through logrus (all of
// Hoplite) inside an application that logs through slog.
//
// The logger's level is the lowest level h enables when NewLogger is
// called (logrus drops what is below it before building an entry, so a
// disabled Debug costs no formatting); each entry is asked of h again
// before it is handled. Levels map to slog's of the same name (Trace to
// Debug-4; Fatal and Panic to Error). Fields become attributes in key
// order; an error under logrus.ErrorKey stays an error value. The
// logger writes nothing itself.
func NewLogger(h slog.Handler) *logrus.Logger {
	l := logrus.New()
	l.SetOutput(io.Discard)
	l.SetFormatter(nothing{})
	l.SetLevel(lowestEnabled(h))
	l.AddHook(&slogHook{h: h})
	return l
}

// lowestEnabled is the lowest logrus level whose records h handles
// (Error if it handles none of them: logrus has no "off").
func lowestEnabled(h slog.Handler) logrus.Level {
	ctx := context.Background()
	for _, l := range []logrus.Level{logrus.TraceLevel, logrus.DebugLevel, logrus.InfoLevel, logrus.WarnLevel} {
		if h.Enabled(ctx, slogLevel(l)) {
			return l
		}
	}
	return logrus.ErrorLevel
}

// slogLevel maps a logrus level to slog's.
func slogLevel(l logrus.Level) slog.Level {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel:
		return slog.LevelError
	case logrus.WarnLevel:
		return slog.LevelWarn
	case logrus.InfoLevel:
		return slog.LevelInfo
	case logrus.DebugLevel:
		return slog.LevelDebug
	default:
		return slog.LevelDebug - 4
	}
}

// slogHook hands every entry to an slog.Handler.
type slogHook struct{ h slog.Handler }

func (*slogHook) Levels() []logrus.Level { return logrus.AllLevels }

func (k *slogHook) Fire(e *logrus.Entry) error {
	ctx := e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	level := slogLevel(e.Level)
	if !k.h.Enabled(ctx, level) {
		return nil
	}
	var pc uintptr
	if e.Caller != nil {
		pc = e.Caller.PC
	}
	r := slog.NewRecord(e.Time, level, e.Message, pc)
	keys := make([]string, 0, len(e.Data))
	for key := range e.Data {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		r.AddAttrs(slog.Any(key, e.Data[key]))
	}
	return k.h.Handle(ctx, r)
}

// nothing formats every entry as nothing: the hook has handled it.
type nothing struct{}

func (nothing) Format(*logrus.Entry) ([]byte, error) { return nil, nil }
