// Package directory is Hoplite's object directory as a pure library:
// which nodes hold which objects, and who should send to whom.
//
// LocationTable is the core (no goroutines, no clocks, no I/O): every
// request goes in with the current time and comes out as outbox sends.
// Object ids are spread over shards by ShardIndex; the shard actor that
// wraps one table lives in actors/directory. The rules for object ids
// (ValidateObjectID, ValidateApplicationID) live here, once.
package directory
