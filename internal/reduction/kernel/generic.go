package kernel

import (
	"encoding/binary"
	"math"

	"github.com/hoplite-go/hoplite/messages"
)

// accumulateGeneric is the portable path: it decodes and encodes every
// element with encoding/binary, so it works on any host byte order and any
// buffer address. op and dt have been validated and the lengths checked.
// It dispatches once on dtype and op; each inner loop is straight-line.
func accumulateGeneric(op messages.ReduceOp, dt messages.DType, dst, src []byte) {
	switch dt {
	case messages.DType_FLOAT32:
		genericF32(op, dst, src)
	case messages.DType_FLOAT64:
		genericF64(op, dst, src)
	case messages.DType_INT32:
		genericI32(op, dst, src)
	case messages.DType_INT64:
		genericI64(op, dst, src)
	}
}

func genericF32(op messages.ReduceOp, d, s []byte) {
	le := binary.LittleEndian
	s = s[:len(d)]
	get := func(b []byte, i int) float32 { return math.Float32frombits(le.Uint32(b[i:])) }
	put := func(b []byte, i int, v float32) { le.PutUint32(b[i:], math.Float32bits(v)) }
	switch op {
	case messages.ReduceOp_SUM:
		for i := 0; i+4 <= len(d); i += 4 {
			put(d, i, get(d, i)+get(s, i))
		}
	case messages.ReduceOp_PROD:
		for i := 0; i+4 <= len(d); i += 4 {
			put(d, i, get(d, i)*get(s, i))
		}
	case messages.ReduceOp_MIN:
		for i := 0; i+4 <= len(d); i += 4 {
			put(d, i, min(get(d, i), get(s, i)))
		}
	case messages.ReduceOp_MAX:
		for i := 0; i+4 <= len(d); i += 4 {
			put(d, i, max(get(d, i), get(s, i)))
		}
	}
}

func genericF64(op messages.ReduceOp, d, s []byte) {
	le := binary.LittleEndian
	s = s[:len(d)]
	get := func(b []byte, i int) float64 { return math.Float64frombits(le.Uint64(b[i:])) }
	put := func(b []byte, i int, v float64) { le.PutUint64(b[i:], math.Float64bits(v)) }
	switch op {
	case messages.ReduceOp_SUM:
		for i := 0; i+8 <= len(d); i += 8 {
			put(d, i, get(d, i)+get(s, i))
		}
	case messages.ReduceOp_PROD:
		for i := 0; i+8 <= len(d); i += 8 {
			put(d, i, get(d, i)*get(s, i))
		}
	case messages.ReduceOp_MIN:
		for i := 0; i+8 <= len(d); i += 8 {
			put(d, i, min(get(d, i), get(s, i)))
		}
	case messages.ReduceOp_MAX:
		for i := 0; i+8 <= len(d); i += 8 {
			put(d, i, max(get(d, i), get(s, i)))
		}
	}
}

func genericI32(op messages.ReduceOp, d, s []byte) {
	le := binary.LittleEndian
	s = s[:len(d)]
	get := func(b []byte, i int) int32 { return int32(le.Uint32(b[i:])) }
	put := func(b []byte, i int, v int32) { le.PutUint32(b[i:], uint32(v)) }
	switch op {
	case messages.ReduceOp_SUM:
		for i := 0; i+4 <= len(d); i += 4 {
			put(d, i, get(d, i)+get(s, i))
		}
	case messages.ReduceOp_PROD:
		for i := 0; i+4 <= len(d); i += 4 {
			put(d, i, get(d, i)*get(s, i))
		}
	case messages.ReduceOp_MIN:
		for i := 0; i+4 <= len(d); i += 4 {
			put(d, i, min(get(d, i), get(s, i)))
		}
	case messages.ReduceOp_MAX:
		for i := 0; i+4 <= len(d); i += 4 {
			put(d, i, max(get(d, i), get(s, i)))
		}
	}
}

func genericI64(op messages.ReduceOp, d, s []byte) {
	le := binary.LittleEndian
	s = s[:len(d)]
	get := func(b []byte, i int) int64 { return int64(le.Uint64(b[i:])) }
	put := func(b []byte, i int, v int64) { le.PutUint64(b[i:], uint64(v)) }
	switch op {
	case messages.ReduceOp_SUM:
		for i := 0; i+8 <= len(d); i += 8 {
			put(d, i, get(d, i)+get(s, i))
		}
	case messages.ReduceOp_PROD:
		for i := 0; i+8 <= len(d); i += 8 {
			put(d, i, get(d, i)*get(s, i))
		}
	case messages.ReduceOp_MIN:
		for i := 0; i+8 <= len(d); i += 8 {
			put(d, i, min(get(d, i), get(s, i)))
		}
	case messages.ReduceOp_MAX:
		for i := 0; i+8 <= len(d); i += 8 {
			put(d, i, max(get(d, i), get(s, i)))
		}
	}
}
