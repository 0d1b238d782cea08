package revokeactor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/messages"
)

// A member's broadcaster takes RevokeNotices from any process: whatever
// their bytes (empty and 4 KiB subjects and origins, epochs at the
// limits, a sender that is no member), the core does not panic, forwards
// a first copy to members only, remembers no more notices than its
// window, and a new notice after them is still forwarded and delivered
// once.
func FuzzRevokeNotice(f *testing.F) {
	for _, n := range []*messages.RevokeNotice{
		{Origin: "m1", Subject: "m2", Epoch: 7, From: "m1", SubjectAddress: "h:2"},
		{Subject: "m3", Epoch: 1<<64 - 1},
		{Origin: strings.Repeat("o", 4097), Subject: strings.Repeat("s", 4097), From: "nobody"},
	} {
		b, _ := proto.Marshal(n)
		f.Add(append([]byte{byte(len(b))}, b...))
	}
	members := []string{"m0", "m1", "m2", "m3", "m4"}
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := revoke.NewOverlay(members, "m0")
		if err != nil {
			t.Fatal(err)
		}
		const window = 4
		b := revoke.NewBroadcaster(o, revoke.WithWindow(window), revoke.WithReplayChanges(2))
		isMember := map[string]bool{}
		for _, m := range members {
			isMember[m] = true
		}
		for len(data) > 0 {
			n := min(int(data[0]), len(data)-1)
			raw := data[1 : 1+n]
			data = data[1+n:]
			var m messages.RevokeNotice
			if proto.Unmarshal(raw, &m) != nil {
				continue
			}
			d := b.Step(time.Time{}, revoke.Received{From: m.GetFrom(), Notice: revoke.NoticeOf(&m)})
			for _, s := range d.Sends {
				if to, _ := s.To.(string); !isMember[to] || to == "m0" || to == m.GetFrom() {
					t.Fatalf("a copy of %v to %q", &m, s.To)
				}
			}
			if b.Remembered() > window {
				t.Fatalf("the broadcaster remembers %d notices, its window is %d", b.Remembered(), window)
			}
		}
		fresh := revoke.Notice{Origin: "m1", Subject: fmt.Sprintf("fresh-%d", len(data)), Epoch: 42}
		if d := b.Step(time.Time{}, revoke.Received{From: "m1", Notice: fresh}); !d.Deliver || len(d.Sends) == 0 {
			t.Fatalf("a new notice after the fuzzed ones: %+v", d)
		}
		if d := b.Step(time.Time{}, revoke.Received{From: "m2", Notice: fresh}); d.Deliver {
			t.Fatal("the same notice delivered twice")
		}
	})
}
