package cluster

// Hoplite patch: the protobuf files are registered under Hoplite's own
// names (files hoplite/protoactor/cluster.proto, gossip.proto, ...,
// package hoplite.protoactor.cluster), not upstream's, so that a program
// can link upstream Proto.Actor beside Hoplite: the protobuf runtime
// panics at init on a file path or a full name registered twice. protoc
// maps the virtual directory hoplite/protoactor to this one and the
// actor package's.

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) -Ihoplite/protoactor=. -Ihoplite/protoactor=../actor --go_out=. --go_opt=module=github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster hoplite/protoactor/cluster.proto hoplite/protoactor/gossip.proto hoplite/protoactor/grain.proto hoplite/protoactor/pubsub.proto hoplite/protoactor/pubsub_test.proto"
