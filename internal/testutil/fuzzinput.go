package testutil

// FuzzInput reads a fuzz target's bytes as a program of choices: an
// exhausted input reads as zeros, so every input is a valid program.
type FuzzInput struct{ b []byte }

// NewFuzzInput reads data.
func NewFuzzInput(data []byte) *FuzzInput { return &FuzzInput{b: data} }

// More reports whether unread bytes are left.
func (in *FuzzInput) More() bool { return len(in.b) > 0 }

// Byte reads one byte (0 once the input is exhausted).
func (in *FuzzInput) Byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

// Bytes reads a length byte and then up to that many bytes.
func (in *FuzzInput) Bytes() []byte {
	n := min(int(in.Byte()), len(in.b))
	p := in.b[:n]
	in.b = in.b[n:]
	return p
}

// HostileInt is a size, offset, timeout or count a peer may send, chosen
// by c: 0, -1, the least and the greatest int64, or one of own (values
// that mean something to the target: a small count, a chunk, 2^31-1).
func HostileInt(c byte, own ...int64) int64 {
	switch i := int(c) % (4 + len(own)); i {
	case 0:
		return 0
	case 1:
		return -1
	case 2:
		return -1 << 63
	case 3:
		return 1<<63 - 1
	default:
		return own[i-4]
	}
}
