// Package directory is Hoplite's object directory: which nodes hold which
// objects, and who should send to whom.
//
// LocationTable is the pure core (no goroutines, no clocks, no I/O): every
// request goes in with the current time and comes out as a list of Sends.
// Shard is the thin actor around one LocationTable; object ids are spread
// over shards by ShardIndex.
package directory
