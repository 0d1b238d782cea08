// Package messages holds every message that may cross a process: the
// application API (Put, Get, Delete, Reduce), the directory protocol between
// store nodes and directory shards, and the typed Error they carry.
package messages

//go:generate sh -c "protoc --plugin=protoc-gen-go=$(go tool -n protoc-gen-go) --go_out=. --go_opt=paths=source_relative *.proto"
