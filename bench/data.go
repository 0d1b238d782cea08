package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/bits"
	"math/rand/v2"

	"github.com/hoplite-go/hoplite/messages"
)

// DataSpec names a benchmark object; its bytes are a function of it.
type DataSpec struct {
	ID   string
	Size int64
	// Float32 makes float32 values whose SUM over up to Sources objects is
	// exact in any order; otherwise the bytes are uniformly random.
	Float32 bool
	Sources int
}

func (d DataSpec) proto() *messages.BenchData {
	return &messages.BenchData{ObjectId: d.ID, Size: d.Size, Float32: d.Float32, Sources: int32(d.Sources)}
}

func specOf(m *messages.BenchData) DataSpec {
	return DataSpec{ID: m.GetObjectId(), Size: m.GetSize(), Float32: m.GetFloat32(), Sources: int(m.GetSources())}
}

// float32Shift: values are k·2^-20 with k < 2^(24-⌈log2 sources⌉), so any
// partial sum of up to `sources` of them is an integer multiple of 2^-20
// below 2^24·2^-20: exactly representable, whatever the reduce order. The
// mantissas stay random (20+ random bits of 32): not compressible to
// speak of.
func float32Mask(sources int) uint32 {
	lg := bits.Len(uint(max(sources, 1) - 1))
	return 1<<(24-lg) - 1
}

// Generate returns the object's bytes.
func Generate(d DataSpec) []byte {
	b := make([]byte, d.Size)
	fill(d, b)
	return b
}

func fill(d DataSpec, b []byte) {
	newDataStream(d).next(b)
}

// dataSeed is the ChaCha8 seed of d's bytes: a function of its id.
func dataSeed(d DataSpec) [32]byte {
	h := fnv.New64a()
	_, _ = h.Write([]byte(d.ID))
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], h.Sum64())
	copy(seed[8:], "hoplite-bench-data")
	return seed
}

// maskFloat32s makes every whole 4-byte word of b a float32 k·2^-20
// with k the word's bits under mask.
func maskFloat32s(b []byte, mask uint32) {
	for i := 0; i+4 <= len(b); i += 4 {
		k := binary.LittleEndian.Uint32(b[i:]) & mask
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(k)*(1.0/(1<<20))))
	}
}

// checkWindow is how much of the expected bytes Check makes at a time.
const checkWindow = 256 << 10

// Check compares got with what srcs make; the error says where they
// differ. It makes the expected bytes a window at a time, never the
// whole object: a verification between two measured repetitions must
// not grow and churn the member's heap by an object or two, which the
// Go runtime then hands back to the kernel while the next repetition
// runs.
func Check(id string, got []byte, srcs []DataSpec) error {
	if len(srcs) == 0 {
		return fmt.Errorf("no sources")
	}
	size := srcs[0].Size
	for _, s := range srcs[1:] {
		if !s.Float32 || s.Size != size {
			return fmt.Errorf("source %s: a sum needs float32 sources of equal size", s.ID)
		}
	}
	if int64(len(got)) != size {
		return fmt.Errorf("%s: %d bytes, want %d", id, len(got), size)
	}
	gens := make([]*dataStream, len(srcs))
	for i, s := range srcs {
		gens[i] = newDataStream(s)
	}
	acc, buf := make([]byte, checkWindow), make([]byte, checkWindow)
	for off := 0; off < len(got); off += checkWindow {
		n := min(checkWindow, len(got)-off)
		gens[0].next(acc[:n])
		for _, g := range gens[1:] {
			g.next(buf[:n])
			addFloat32s(acc[:n], buf[:n])
		}
		if !bytes.Equal(got[off:off+n], acc[:n]) {
			i := 0
			for got[off+i] == acc[i] {
				i++
			}
			return fmt.Errorf("%s: the bytes differ from offset %d on", id, off+i)
		}
	}
	return nil
}

// dataStream makes a DataSpec's bytes front to back, in pieces: the
// same bytes as Generate, since ChaCha8 reads continue one stream and
// every piece but the last is a multiple of 4 bytes (the float32 mask
// applies per 4-byte word).
type dataStream struct {
	d    DataSpec
	r    *rand.ChaCha8
	mask uint32
}

func newDataStream(d DataSpec) *dataStream {
	return &dataStream{d: d, r: rand.NewChaCha8(dataSeed(d)), mask: float32Mask(d.Sources)}
}

func (g *dataStream) next(b []byte) {
	_, _ = g.r.Read(b)
	if g.d.Float32 {
		maskFloat32s(b, g.mask)
	}
}

func addFloat32s(acc, b []byte) {
	for i := 0; i+4 <= len(acc); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(acc[i:])) + math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		binary.LittleEndian.PutUint32(acc[i:], math.Float32bits(x))
	}
}
