package member

import (
	"slices"
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The protobuf runtime builds a message type's encoder and decoder the
// first time a value of that type is marshalled or unmarshalled, by
// reflection over its fields, and every process pays it once per type.
// Left to the first operation, that lands on its path: the first 1 KiB
// broadcast to 7 on the testbed spent 1.0–1.4 ms in its Locate's round
// trip against 0.4–0.6 ms later (the client encoding a Locate and decoding
// a LocateReply for the first time, the shard's member the reverse), and
// the whole first operation took 1.6–1.8× the rest (docs/benchmarks.md,
// "The first small operation"). A member builds them when it starts, as
// part of its warm-up.

// codecPackages are the protobuf packages whose messages a member sends
// and receives: ours, and Proto.Actor's actor and remote envelopes.
var codecPackages = []protoreflect.FullName{"hoplite", "hoplite.protoactor.actor", "hoplite.protoactor.remote"}

// isCodecType says whether mt is in one of codecPackages. The package is
// compared whole: Proto.Actor's are named inside ours.
func isCodecType(mt protoreflect.MessageType) bool {
	return slices.Contains(codecPackages, mt.Descriptor().ParentFile().Package())
}

var codecsOnce sync.Once

// warmCodecs builds, once per process, the encoder and decoder of every
// message type in codecPackages by marshalling and unmarshalling an empty
// value of each, and returns how many types that was (0 on later calls).
func warmCodecs() (types int) {
	codecsOnce.Do(func() {
		protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
			if isCodecType(mt) {
				m := mt.New().Interface()
				b, _ := proto.Marshal(m) // an empty message always encodes
				_ = proto.Unmarshal(b, m)
				types++
			}
			return true
		})
	})
	return types
}
