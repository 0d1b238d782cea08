package kernel

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

const benchChunk = 1 << 20 // 1 MiB

// BenchmarkAccumulate measures SUM over a 1 MiB chunk for the unsafe fast
// path and the encoding/binary generic path side by side; MB/s is
// throughput of dst bytes.
func BenchmarkAccumulate(b *testing.B) {
	type path struct {
		name string
		fn   func(messages.ReduceOp, messages.DType, []byte, []byte)
	}
	paths := []path{{"fast", accumulateFast}, {"generic", accumulateGeneric}}
	cases := []struct {
		op messages.ReduceOp
		dt messages.DType
	}{
		{messages.ReduceOp_SUM, messages.DType_FLOAT32},
		{messages.ReduceOp_SUM, messages.DType_FLOAT64},
		{messages.ReduceOp_SUM, messages.DType_INT64},
		{messages.ReduceOp_MAX, messages.DType_FLOAT32},
	}
	for _, c := range cases {
		for _, p := range paths {
			b.Run(c.op.String()+"/"+c.dt.String()+"/"+p.name, func(b *testing.B) {
				if p.name == "fast" && !littleEndianHost {
					b.Skip("fast path needs a little-endian host")
				}
				dst, src := benchBufs(c.dt, 0)
				b.SetBytes(benchChunk)
				for b.Loop() {
					p.fn(c.op, c.dt, dst, src)
				}
			})
		}
	}
	// The public entry point on misaligned buffers (falls back to generic).
	b.Run("SUM/FLOAT32/public-unaligned", func(b *testing.B) {
		dst, src := benchBufs(messages.DType_FLOAT32, 1)
		b.SetBytes(benchChunk)
		for b.Loop() {
			if err := Accumulate(messages.ReduceOp_SUM, messages.DType_FLOAT32, dst, src); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchBufs returns 1 MiB dst and src buffers at address offset off holding
// small normal values of dt (no NaN, Inf or subnormals, which would make
// float timings data-dependent rather than path-dependent).
func benchBufs(dt messages.DType, off int) (dst, src []byte) {
	dst, src = alignedBuf(benchChunk, off), alignedBuf(benchChunk, off)
	w, _ := Width(dt)
	n := benchChunk / w
	vals := func(i int) (float64, float64) { return 1 + float64(i%17), 1 + float64(i%13)/16 }
	for i := range n {
		d, s := vals(i)
		switch dt {
		case messages.DType_FLOAT32:
			binary.LittleEndian.PutUint32(dst[i*4:], math.Float32bits(float32(d)))
			binary.LittleEndian.PutUint32(src[i*4:], math.Float32bits(float32(s)))
		case messages.DType_FLOAT64:
			binary.LittleEndian.PutUint64(dst[i*8:], math.Float64bits(d))
			binary.LittleEndian.PutUint64(src[i*8:], math.Float64bits(s))
		case messages.DType_INT32:
			binary.LittleEndian.PutUint32(dst[i*4:], uint32(i*7919))
			binary.LittleEndian.PutUint32(src[i*4:], uint32(i*104729))
		case messages.DType_INT64:
			binary.LittleEndian.PutUint64(dst[i*8:], uint64(i)*7919)
			binary.LittleEndian.PutUint64(src[i*8:], uint64(i)*104729)
		}
	}
	return dst, src
}

// sumRolled is the plain, non-unrolled loop, kept only to show what the
// 8-way unroll in sumLoop buys.
func sumRolled[T number](d, s []T) {
	s = s[:len(d)]
	for i := range d {
		d[i] += s[i]
	}
}

// BenchmarkUnroll compares the unrolled SUM loop with the plain loop.
func BenchmarkUnroll(b *testing.B) {
	b.Run("FLOAT32/unrolled8", func(b *testing.B) { benchLoop(b, messages.DType_FLOAT32, sumLoop[float32]) })
	b.Run("FLOAT32/rolled", func(b *testing.B) { benchLoop(b, messages.DType_FLOAT32, sumRolled[float32]) })
	b.Run("INT64/unrolled8", func(b *testing.B) { benchLoop(b, messages.DType_INT64, sumLoop[int64]) })
	b.Run("INT64/rolled", func(b *testing.B) { benchLoop(b, messages.DType_INT64, sumRolled[int64]) })
}

func benchLoop[T number](b *testing.B, dt messages.DType, fn func(d, s []T)) {
	db, sb := benchBufs(dt, 0)
	d, s := view[T](db), view[T](sb)
	b.SetBytes(benchChunk)
	for b.Loop() {
		fn(d, s)
	}
}
