// Package fingerprint identifies an object's contents in 64 bits: the
// store node that creates an object, the Reduce coordinator that seals a
// small result and the directory that compares two Puts of one id all
// compute it the same way, so it lives below all of them.
package fingerprint

import "hash/crc32"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Of identifies data so that a second Put of the same id on another node
// can tell "same bytes" (idempotent) from "other bytes" (conflict) without
// moving the object. Two CRC-32s with different polynomials, both hardware
// accelerated, make 64 bits; it detects accidents, not adversaries.
func Of(data []byte) uint64 {
	return uint64(crc32.Checksum(data, castagnoli))<<32 | uint64(crc32.ChecksumIEEE(data))
}

// Writer computes Of incrementally, for objects produced chunk by chunk (a
// Reduce's target). The zero value is ready to use.
type Writer struct{ c, ieee uint32 }

// Write adds the next bytes.
func (f *Writer) Write(p []byte) {
	f.c = crc32.Update(f.c, castagnoli, p)
	f.ieee = crc32.Update(f.ieee, crc32.IEEETable, p)
}

// Sum is Of everything written.
func (f *Writer) Sum() uint64 { return uint64(f.c)<<32 | uint64(f.ieee) }
