package cluster

import (
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/logbridge"
)

// actorSystemOptions routes Proto.Actor's logs into our logrus logger, so
// there is one log stream with one format and level.
func actorSystemOptions(log *logrus.Logger) []actor.ConfigOption {
	return []actor.ConfigOption{logbridge.ActorSystemOption(log)}
}
