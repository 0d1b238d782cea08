// Package messages holds every message that may cross a process: the
// application API (Put, Get, Delete, Reduce), the directory protocol between
// store nodes and directory shards, and the typed Error they carry.
// Every message with an error field has Err(), the field as a plain
// error, nil on success: `if err := reply.Err(); err != nil`.
package messages

// The files are registered as hoplite/*.proto (protoc maps the virtual
// directory hoplite to this one): a bare admin.proto is a path another
// program's protobuf files may take too, and the protobuf runtime panics
// at init on a path registered twice.
//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) -Ihoplite=. --go_out=. --go_opt=module=github.com/hoplite-go/hoplite/messages $(ls *.proto | sed s,^,hoplite/,)"
