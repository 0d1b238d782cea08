// Package cluster wires Hoplite nodes together: StartLocal runs an
// embedded cluster of N logical nodes in one process (in-memory data
// plane), each under its own supervisor with its store node and its share
// of the directory shards.
package cluster
