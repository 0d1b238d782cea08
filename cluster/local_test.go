package cluster

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestSmokePutGet(t *testing.T) {
	l, err := StartLocal(Config{Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range []int{0, 1, 100 << 10, 3 << 20} {
		id := "obj-" + string(rune('a'+n%26)) + time.Now().String()
		data := randomBytes(uint64(n), n)
		if err := l.Client(0).Put(ctx, id, data); err != nil {
			t.Fatalf("put %d: %v", n, err)
		}
		got, err := l.Client(2).Get(ctx, id)
		if err != nil {
			t.Fatalf("get %d: %v", n, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("size %d: bytes differ", n)
		}
	}
}
