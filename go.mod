module github.com/hoplite-go/hoplite

go 1.26.8

require (
	github.com/asynkron/protoactor-go v0.0.0-20240822202345-3c0e61ca19c9 // indirect
	github.com/sirupsen/logrus v1.10.2 // indirect
	golang.org/x/sys v0.19.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

tool google.golang.org/protobuf/cmd/protoc-gen-go
