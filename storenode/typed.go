package storenode

import (
	"context"
	"encoding/binary"
	"math"
	"reflect"

	"github.com/hoplite-go/hoplite/internal/reduction/kernel"
	"github.com/hoplite-go/hoplite/messages"
)

// Number is an element type that Reduce understands. Objects of numbers
// are stored as their little-endian bytes, one element after the other,
// which is what a Reduce with the matching messages.DType reads.
type Number interface {
	~float32 | ~float64 | ~int32 | ~int64
}

// DTypeOf is the Reduce element type of T (of its underlying type).
func DTypeOf[T Number]() messages.DType {
	switch reflect.TypeFor[T]().Kind() {
	case reflect.Float32:
		return messages.DType_FLOAT32
	case reflect.Float64:
		return messages.DType_FLOAT64
	case reflect.Int32:
		return messages.DType_INT32
	default:
		return messages.DType_INT64
	}
}

// width is the size of one element of dt in bytes.
func width(dt messages.DType) int {
	w, _ := kernel.Width(dt) // every DTypeOf is known
	return w
}

// Encode returns v as an object's bytes (little-endian, in order).
func Encode[T Number](v []T) []byte {
	dt := DTypeOf[T]()
	b := make([]byte, width(dt)*len(v))
	le := binary.LittleEndian
	switch dt {
	case messages.DType_FLOAT32:
		for i, e := range v {
			le.PutUint32(b[4*i:], math.Float32bits(float32(e)))
		}
	case messages.DType_FLOAT64:
		for i, e := range v {
			le.PutUint64(b[8*i:], math.Float64bits(float64(e)))
		}
	case messages.DType_INT32:
		for i, e := range v {
			le.PutUint32(b[4*i:], uint32(int32(e)))
		}
	default:
		for i, e := range v {
			le.PutUint64(b[8*i:], uint64(int64(e)))
		}
	}
	return b
}

// Decode reads an object's bytes as elements of T. A length that is not
// a whole number of elements is INVALID_ARGUMENT (the object holds
// something else).
func Decode[T Number](b []byte) ([]T, error) {
	dt := DTypeOf[T]()
	w := width(dt)
	if len(b)%w != 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"%d bytes are not a whole number of %d-byte %s elements", len(b), w, dt)
	}
	v := make([]T, len(b)/w)
	le := binary.LittleEndian
	switch dt {
	case messages.DType_FLOAT32:
		for i := range v {
			v[i] = T(math.Float32frombits(le.Uint32(b[4*i:])))
		}
	case messages.DType_FLOAT64:
		for i := range v {
			v[i] = T(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case messages.DType_INT32:
		for i := range v {
			v[i] = T(int32(le.Uint32(b[4*i:])))
		}
	default:
		for i := range v {
			v[i] = T(int64(le.Uint64(b[8*i:])))
		}
	}
	return v, nil
}

// PutNumbers stores v as object id (see Encode).
func PutNumbers[T Number](ctx context.Context, c *Client, id string, v []T) error {
	return c.Put(ctx, id, Encode(v))
}

// GetNumbers fetches object id as elements of T (see Decode).
func GetNumbers[T Number](ctx context.Context, c *Client, id string) ([]T, error) {
	b, err := c.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return Decode[T](b)
}

// ReduceNumbers reduces num of sources, objects of T, into target with
// op; the element type is T's.
func ReduceNumbers[T Number](ctx context.Context, c *Client, target string, sources []string, num int, op messages.ReduceOp) (*messages.ReduceReply, error) {
	return c.Reduce(ctx, target, sources, num, op, DTypeOf[T]())
}

// PutFloat32s stores v as object id, little-endian.
func (c *Client) PutFloat32s(ctx context.Context, id string, v []float32) error {
	return PutNumbers(ctx, c, id, v)
}

// GetFloat32s fetches object id as float32s.
func (c *Client) GetFloat32s(ctx context.Context, id string) ([]float32, error) {
	return GetNumbers[float32](ctx, c, id)
}

// PutFloat64s stores v as object id, little-endian.
func (c *Client) PutFloat64s(ctx context.Context, id string, v []float64) error {
	return PutNumbers(ctx, c, id, v)
}

// GetFloat64s fetches object id as float64s.
func (c *Client) GetFloat64s(ctx context.Context, id string) ([]float64, error) {
	return GetNumbers[float64](ctx, c, id)
}

// PutInt32s stores v as object id, little-endian.
func (c *Client) PutInt32s(ctx context.Context, id string, v []int32) error {
	return PutNumbers(ctx, c, id, v)
}

// GetInt32s fetches object id as int32s.
func (c *Client) GetInt32s(ctx context.Context, id string) ([]int32, error) {
	return GetNumbers[int32](ctx, c, id)
}

// PutInt64s stores v as object id, little-endian.
func (c *Client) PutInt64s(ctx context.Context, id string, v []int64) error {
	return PutNumbers(ctx, c, id, v)
}

// GetInt64s fetches object id as int64s.
func (c *Client) GetInt64s(ctx context.Context, id string) ([]int64, error) {
	return GetNumbers[int64](ctx, c, id)
}
