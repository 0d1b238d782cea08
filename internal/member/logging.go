package member

import (
	"log/slog"
	"os"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/logbridge"
	"github.com/hoplite-go/hoplite/messages"
)

// defaultLogger is where a cluster a program embeds logs when it was
// given no logger: warnings and errors on stderr. A library's info
// records (members joining, views changing, shards placed) are the
// application's business only if it asks for them; `hoplite node` and
// `hoplite demo` set their own level.
func defaultLogger() *logrus.Logger {
	l := logrus.New()
	l.SetOutput(os.Stderr)
	l.SetLevel(logrus.WarnLevel)
	return l
}

// loggers resolves the two ways a configuration names its logger: a
// *logrus.Logger (Log), or a *slog.Logger (Logger) whose handler then
// receives everything, Proto.Actor's records directly and Hoplite's
// through a logrus logger that forwards to it. It returns the logrus
// logger Hoplite logs through and the slog.Handler Proto.Actor's
// records go to.
func loggers(log *logrus.Logger, logger *slog.Logger) (*logrus.Logger, slog.Handler, error) {
	switch {
	case log != nil && logger != nil:
		return nil, nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "set Log or Logger, not both")
	case logger != nil:
		return logbridge.NewLogger(logger.Handler()), logger.Handler(), nil
	case log == nil:
		log = defaultLogger()
	}
	return log, logbridge.NewHandler(log), nil
}

// appSystemOptions routes the application actor system's Proto.Actor
// logs to h, demoted and throttled as a member's are (logbridge.MemberLogger), so
// there is one log stream with one format and level.
func appSystemOptions(h slog.Handler) []actor.ConfigOption {
	return []actor.ConfigOption{actor.WithLoggerFactory(func(s *actor.ActorSystem) *slog.Logger {
		return logbridge.MemberLoggerTo(h, s.ID)
	})}
}
