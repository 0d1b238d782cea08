// Package fingerprint identifies an object's contents in 64 bits: the
// store node that creates an object, the Reduce coordinator that seals a
// small result and the directory that compares two Puts of one id all
// compute it the same way, so it lives below all of them.
package fingerprint

import "github.com/zeebo/xxh3"

// Of identifies data so that a second Put of the same id on another node
// can tell "same bytes" (idempotent) from "other bytes" (conflict) without
// moving the object. It is XXH3's 64-bit hash: a creator reads every byte
// of a large Put once more for it, on the cores that receive it, so it
// has to cost a small part of the transfer (the benchmarks beside it
// compare it with the two hardware CRC-32s it replaced and with a copy).
// It detects accidents, not adversaries.
func Of(data []byte) uint64 { return xxh3.Hash(data) }

// Writer computes Of incrementally, for objects produced or received
// chunk by chunk. The zero value is ready to use.
type Writer struct{ h xxh3.Hasher }

// Write adds the next bytes.
func (f *Writer) Write(p []byte) { _, _ = f.h.Write(p) }

// Sum is Of everything written.
func (f *Writer) Sum() uint64 { return f.h.Sum64() }
