package memberview

import "hash/fnv"

// Digest is a 64-bit digest of a sorted list of live members, never 0
// (0 means "no digest" on the wire). Two members compare views by
// digest and exchange the lists only when the digests differ: an idle
// comparison then costs a few bytes instead of O(n). A collision only
// hides a disagreement from the comparison's warning; placement never
// reads the digest.
func Digest(live []string) uint64 {
	h := fnv.New64a()
	for _, id := range live {
		h.Write([]byte(id))
		h.Write([]byte{0}) // ids hold no NUL: "ab","c" and "a","bc" differ
	}
	if d := h.Sum64(); d != 0 {
		return d
	}
	return 1
}
