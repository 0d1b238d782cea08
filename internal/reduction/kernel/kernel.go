// Package kernel implements the element-wise reduce kernels that Hoplite's
// reduce tree nodes apply to objects chunk by chunk.
//
// An object taking part in a reduce is a byte buffer holding a
// little-endian array of one numeric dtype (float32, float64, int32 or
// int64). A reduce node copies its first input into the output and then
// folds every further input in with [Accumulate], so no identity element
// is needed.
//
// # Semantics
//
//   - SUM and PROD on floats follow IEEE 754 (Go's + and *).
//   - SUM and PROD on integers wrap around in two's complement on overflow,
//     exactly like Go's + and * on int32/int64; no error is reported.
//   - MIN and MAX on floats behave like Go's built-in min and max (and like
//     [math.Min] and [math.Max] for finite operands): if either operand is
//     NaN the result is NaN (NaN propagates, even against ±Inf, where
//     math.Min(-Inf, NaN) would return -Inf); min(-0, +0) is -0 and
//     max(-0, +0) is +0. The NaN payload of the result is unspecified.
//   - MIN and MAX on integers are the usual signed comparisons.
//
// # Chunking and alignment
//
// [Accumulate] works on whole elements only: len(dst) and len(src) must be
// equal multiples of the dtype width. Callers that split an object into
// chunks must keep every chunk boundary at a multiple of the width from the
// start of the object (use [AlignDown] to pick boundaries); an element must
// never be split across two chunks.
//
// The memory addresses of the buffers need not be aligned. On little-endian
// hosts, buffers whose addresses are aligned for the element type are
// reinterpreted in place as []float32, []float64, []int32 or []int64 and
// processed by unrolled loops; misaligned buffers (and all buffers on
// big-endian hosts) take a slower but equivalent encoding/binary path.
package kernel

import (
	"github.com/hoplite-go/hoplite/messages"
)

// Width returns the size in bytes of one element of dtype dt. It returns an
// INVALID_ARGUMENT error (matching messages.ErrInvalidArgument) for an
// unspecified or unknown dtype.
func Width(dt messages.DType) (int, error) {
	switch dt {
	case messages.DType_FLOAT32, messages.DType_INT32:
		return 4, nil
	case messages.DType_FLOAT64, messages.DType_INT64:
		return 8, nil
	}
	return 0, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
		"kernel: unknown dtype %s (%d)", dt, int32(dt))
}

// validOp reports an INVALID_ARGUMENT error for an unspecified or unknown op.
func validOp(op messages.ReduceOp) error {
	switch op {
	case messages.ReduceOp_SUM, messages.ReduceOp_MIN,
		messages.ReduceOp_MAX, messages.ReduceOp_PROD:
		return nil
	}
	return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
		"kernel: unknown reduce op %s (%d)", op, int32(op))
}

// Validate checks that op and dt are known and that an object of size bytes
// is a whole number of dt elements. It returns an INVALID_ARGUMENT error
// (matching messages.ErrInvalidArgument) describing the first problem found,
// or nil.
func Validate(op messages.ReduceOp, dt messages.DType, size int64) error {
	if err := validOp(op); err != nil {
		return err
	}
	w, err := Width(dt)
	if err != nil {
		return err
	}
	if size < 0 {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"kernel: negative object size %d", size)
	}
	if size%int64(w) != 0 {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"kernel: object size %d is not a multiple of the %s width %d", size, dt, w)
	}
	return nil
}

// AlignDown returns the largest multiple of the width of dt that is <= n,
// for use as a chunk boundary. For an unknown dtype it returns n unchanged;
// callers are expected to have checked the dtype with [Validate] first.
func AlignDown(n int64, dt messages.DType) int64 {
	w, err := Width(dt)
	if err != nil {
		return n
	}
	r := n % int64(w)
	if r < 0 {
		r += int64(w)
	}
	return n - r
}

// Accumulate folds src into dst element-wise and in place:
// dst[i] = op(dst[i], src[i]) for every element i, where both buffers hold
// little-endian arrays of dtype dt.
//
// len(dst) must equal len(src) and be a multiple of the dtype width; any
// violation, or an unknown op or dtype, yields an INVALID_ARGUMENT error
// (matching messages.ErrInvalidArgument) and leaves dst untouched. Callers
// chunking larger objects must keep chunk boundaries at multiples of the
// width (see [AlignDown]). The buffers' addresses need not be aligned. dst
// and src may be the same slice but must not otherwise overlap.
//
// See the package documentation for the per-op semantics (NaN, signed
// zeros, integer wrap-around).
func Accumulate(op messages.ReduceOp, dt messages.DType, dst, src []byte) error {
	if err := validOp(op); err != nil {
		return err
	}
	w, err := Width(dt)
	if err != nil {
		return err
	}
	if len(dst) != len(src) {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"kernel: length mismatch: dst has %d bytes, src has %d", len(dst), len(src))
	}
	if len(dst)%w != 0 {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"kernel: buffer length %d is not a multiple of the %s width %d", len(dst), dt, w)
	}
	if len(dst) == 0 {
		return nil
	}
	if canFast(dst, src, w) {
		accumulateFast(op, dt, dst, src)
	} else {
		accumulateGeneric(op, dt, dst, src)
	}
	return nil
}
