package member

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// codecsChildEnv runs TestWarmCodecsBuildsTheCodecsBeforeFirstUse's body
// in a process of its own: "cold" or "warm" (warmCodecs first).
const codecsChildEnv = "HOPLITE_CODECS_CHILD"

// firstLocateMallocs is how many heap allocations the first encoding and
// decoding of a Locate and its LocateReply in this process make.
func firstLocateMallocs() uint64 {
	l := &messages.Locate{ObjectId: "x", Receiver: &messages.NodeRef{NodeId: "n", Address: "a"}, TimeoutMs: 1}
	r := &messages.LocateReply{ObjectId: "x", Size: 3, HasInline: true, InlineData: []byte("abc"),
		Sender: &messages.NodeRef{NodeId: "n"}, Error: &messages.Error{Message: "m"}, ReducedIds: []string{"a"}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	lb, _ := proto.Marshal(l)
	rb, _ := proto.Marshal(r)
	_ = proto.Unmarshal(lb, &messages.Locate{})
	_ = proto.Unmarshal(rb, &messages.LocateReply{})
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}

// A member builds the protobuf codecs of the messages it exchanges when it
// warms up: the first Locate and LocateReply a process then encodes and
// decodes allocate no more than later ones, where a cold process builds
// each type's coder by reflection on that first use. Allocations, not
// time: each case runs in a new process of this test binary, where
// nothing has used the types yet.
func TestWarmCodecsBuildsTheCodecsBeforeFirstUse(t *testing.T) {
	if mode := os.Getenv(codecsChildEnv); mode != "" {
		types := 0
		if mode == "warm" {
			types = warmCodecs()
		}
		first := firstLocateMallocs()
		fmt.Printf("types=%d first=%d again=%d\n", types, first, firstLocateMallocs())
		return
	}
	run := func(mode string) (types int, first, again uint64) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestWarmCodecsBuildsTheCodecsBeforeFirstUse$", "-test.count=1")
		cmd.Env = append(os.Environ(), codecsChildEnv+"="+mode)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s child: %v\n%s", mode, err, out)
		}
		line := out
		if i := bytes.Index(out, []byte("types=")); i >= 0 {
			line = out[i:]
		}
		if _, err := fmt.Sscanf(string(line), "types=%d first=%d again=%d", &types, &first, &again); err != nil {
			t.Fatalf("%s child printed %q: %v", mode, out, err)
		}
		return types, first, again
	}
	_, coldFirst, coldAgain := run("cold")
	types, warmFirst, warmAgain := run("warm")
	t.Logf("cold: first %d allocations, again %d; warm (%d types built): first %d, again %d", coldFirst, coldAgain, types, warmFirst, warmAgain)
	if types < 50 {
		t.Errorf("warmCodecs built %d message types, want every one of hoplite's, actor's and remote's (over 50)", types)
	}
	if coldFirst < 2*coldAgain+20 {
		t.Fatalf("a cold process's first Locate allocated %d times against %d later: the premise (coders built on first use) no longer holds", coldFirst, coldAgain)
	}
	if warmFirst > warmAgain+5 {
		t.Errorf("after warmCodecs the first Locate and LocateReply allocated %d times against %d later: their codecs were not built", warmFirst, warmAgain)
	}
}
