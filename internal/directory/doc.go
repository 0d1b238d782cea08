// Package directory is Hoplite's object directory as a pure library:
// which nodes hold which objects, and who should send to whom.
//
// LocationTable is the core (no goroutines, no clocks, no I/O): every
// request goes into Step with the current time and comes out as an
// outbox.Box, the output every core returns (sends, and the Tick timer
// of its next deadline).
// Object ids are spread over shards by ShardIndex; the shard actor that
// wraps one table lives in internal/actors/shardactor. The table's files follow its
// concepts: the entry and its epochs (table.go), copies (locations.go),
// parked requests and who sends to whom (waiters.go), whether an inline
// object's Locate is answered with its bytes or with a copy that holds
// them (inline.go), subscriptions,
// tombstones and losses; what a Reduce holds of its target (reserved,
// created, committed, released) is reduce_targets.go's, which the table
// asks at each of those steps. The rules for object ids
// (ValidateObjectID, ValidateApplicationID) live here, once.
package directory
