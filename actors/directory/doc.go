// Package directory holds the directory shard actor: the thin shell that
// owns one pure directory.LocationTable, turns messages into calls on it
// and its outbox into sends, parks and ticks requests, and spawns the
// coordinators of the Reduces whose targets hash to it.
package directory
