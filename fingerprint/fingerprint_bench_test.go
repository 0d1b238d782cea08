package fingerprint

import (
	"hash/crc32"
	"testing"
)

// The fingerprint is read over every byte a creator receives, so its cost
// is measured beside the hardware CRC-32 pair it replaced and a copy of
// the same bytes: go test -bench . ./fingerprint/
var (
	benchData  = make([]byte, 64<<20)
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

func BenchmarkOf64MiB(b *testing.B) {
	b.SetBytes(int64(len(benchData)))
	for b.Loop() {
		Of(benchData)
	}
}

func BenchmarkWriter64MiBIn4MiB(b *testing.B) {
	b.SetBytes(int64(len(benchData)))
	for b.Loop() {
		var w Writer
		for off := 0; off < len(benchData); off += 4 << 20 {
			w.Write(benchData[off : off+4<<20])
		}
		w.Sum()
	}
}

func BenchmarkCRC32Pair64MiB(b *testing.B) {
	b.SetBytes(int64(len(benchData)))
	for b.Loop() {
		_ = uint64(crc32.Checksum(benchData, castagnoli))<<32 | uint64(crc32.ChecksumIEEE(benchData))
	}
}

func BenchmarkCopy64MiB(b *testing.B) {
	dst := make([]byte, len(benchData))
	b.SetBytes(int64(len(benchData)))
	for b.Loop() {
		copy(dst, benchData)
	}
}
