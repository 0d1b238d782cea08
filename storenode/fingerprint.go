package storenode

import "hash/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Fingerprint identifies an object's contents so that a second Put of the
// same id on another node can tell "same bytes" (idempotent) from "other
// bytes" (conflict) without moving the object. Two CRC-32s with different
// polynomials, both hardware accelerated, make 64 bits; it detects
// accidents, not adversaries.
func Fingerprint(data []byte) uint64 {
	return uint64(crc32.Checksum(data, castagnoli))<<32 | uint64(crc32.ChecksumIEEE(data))
}

// Fingerprinter computes Fingerprint incrementally, for objects produced
// chunk by chunk (a Reduce's target).
type Fingerprinter struct{ c, ieee uint32 }

// Write adds the next bytes.
func (f *Fingerprinter) Write(p []byte) {
	f.c = crc32.Update(f.c, castagnoli, p)
	f.ieee = crc32.Update(f.ieee, crc32.IEEETable, p)
}

// Sum is the Fingerprint of everything written.
func (f *Fingerprinter) Sum() uint64 { return uint64(f.c)<<32 | uint64(f.ieee) }
