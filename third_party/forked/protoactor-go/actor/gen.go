package actor

// Hoplite patch: the protobuf files are registered under Hoplite's own
// names (file hoplite/protoactor/actor.proto, package
// hoplite.protoactor.actor), not upstream's (actor.proto, package actor),
// so that a program can link upstream Proto.Actor beside Hoplite: the
// protobuf runtime panics at init on a file path or a full name
// registered twice. protoc maps the virtual directory hoplite/protoactor
// to this one.

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) -Ihoplite/protoactor=. --go_out=. --go_opt=module=github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor hoplite/protoactor/actor.proto"

// PID caches its process in a field of its own (pid.go), which protoc
// does not generate: upstream added it to actor.pb.go by hand.
//go:generate sh -c "sed -i '/^type PID struct {/,/^}/s/^\\tsizeCache.*/&\\n\\tp *Process/' actor.pb.go && gofmt -w actor.pb.go"
