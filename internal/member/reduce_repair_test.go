package member

import (
	"bytes"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

func TestGetOfTargetParkedOnTheRootNode(t *testing.T) {
	// A Get of the target waits on node-1 before the Reduce exists; the
	// root lands on node-1 (it holds the only source) and fills the Get's
	// placeholder instead of failing on it.
	l := start(t, Config{Nodes: 3, ChunkSize: 32 << 10})
	ctx := deadline(t, 10*time.Second)
	got := make(chan []byte, 1)
	go func() {
		b, err := l.Client(1).Get(ctx, "t")
		if err != nil {
			t.Error(err)
		}
		got <- b
	}()
	eventually(t, 5*time.Second, "the Get's placeholder on node-1", func() bool { return l.Store(1).Lookup("t") != nil })
	src := int64s(1, 20000)
	if err := l.Client(1).Put(ctx, "s", src); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client(0).Reduce(ctx, "t", []string{"s"}, 1, messages.ReduceOp_SUM, messages.DType_INT64); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, src) {
		t.Fatal("the parked Get returned other bytes than the reduction of one source")
	}
}
