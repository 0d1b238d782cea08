// Package rendezvous is highest-random-weight hashing: each (key, member)
// pair gets a weight, and a key belongs to the members of highest weight.
// A member joining or leaving moves only the keys it ranks first.
package rendezvous

import "hash/fnv"

// Seed is a member's hash seed; compute it once per member.
func Seed(member string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	return h.Sum64()
}

// Weight is the weight of key (already hashed) for the member of seed.
func Weight(seed, key uint64) uint64 {
	return Mix64(seed ^ Mix64(key+0x9e3779b97f4a7c15))
}

// Key hashes a string key.
func Key(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// Mix64 is SplitMix64's finalizer, a bijective mix of all 64 bits: FNV
// alone spreads keys that differ only in their last bytes poorly.
func Mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
