// Package shardactor holds the directory shard actor: the thin shell that
// owns one pure directory.LocationTable, turns messages into calls on it,
// carries out the outbox.Box each returns through the generic shell
// (internal/actors/shell.Carrier), arms one timer at the table's next deadline,
// and spawns the
// coordinators of the Reduces whose targets hash to it.
package shardactor
