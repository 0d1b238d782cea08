package logbridge

import (
	"log/slog"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
)

// ActorSystemOption configures an actor system to log through l:
//
//	system := actor.NewActorSystem(logbridge.ActorSystemOption(log))
func ActorSystemOption(l *logrus.Logger) actor.ConfigOption {
	return actor.WithLoggerFactory(LoggerFactory(l))
}

// LoggerFactory returns an actor.Config.LoggerFactory that logs each actor
// system through l, via SystemLogger.
func LoggerFactory(l *logrus.Logger) func(*actor.ActorSystem) *slog.Logger {
	return func(system *actor.ActorSystem) *slog.Logger {
		return SystemLogger(l, system.ID)
	}
}

// SystemLogger returns the *slog.Logger the actor system with the given ID
// should log through: it writes to l via NewHandler and carries the fields
// lib=Proto.Actor and system=systemID, as Proto.Actor's default logger
// factory does.
func SystemLogger(l *logrus.Logger, systemID string) *slog.Logger {
	return slog.New(NewHandler(l)).With("lib", "Proto.Actor", "system", systemID)
}
