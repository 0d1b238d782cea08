package remote

// Hoplite patch: the protobuf files are registered under Hoplite's own
// names (file hoplite/protoactor/remote.proto, package
// hoplite.protoactor.remote, gRPC service
// hoplite.protoactor.remote.Remoting), not upstream's, so that a program
// can link upstream Proto.Actor beside Hoplite: the protobuf runtime
// panics at init on a file path or a full name registered twice. protoc
// maps the virtual directory hoplite/protoactor to this one and the
// actor package's.

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --plugin=protoc-gen-go-grpc=$(go tool -n protoc-gen-go-grpc) -Ihoplite/protoactor=. -Ihoplite/protoactor=../actor --go_out=. --go_opt=module=github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote --go-grpc_out=. --go-grpc_opt=module=github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote hoplite/protoactor/remote.proto"
