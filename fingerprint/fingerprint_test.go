package fingerprint

import (
	"math/rand/v2"
	"testing"
)

// The incremental Writer agrees with Of however the bytes are cut, and a
// one-bit change changes the fingerprint.
func TestWriterMatchesOf(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 10_000)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	want := Of(data)
	for _, cut := range []int{1, 7, 512, 4096, len(data)} {
		var w Writer
		for p := data; len(p) > 0; {
			n := min(cut, len(p))
			w.Write(p[:n])
			p = p[n:]
		}
		if got := w.Sum(); got != want {
			t.Fatalf("cut %d: Writer %x, Of %x", cut, got, want)
		}
	}
	var empty Writer
	if empty.Sum() != Of(nil) {
		t.Fatalf("empty Writer %x, Of(nil) %x", empty.Sum(), Of(nil))
	}
	data[5000] ^= 1
	if Of(data) == want {
		t.Fatal("a flipped bit left the fingerprint unchanged")
	}
}
