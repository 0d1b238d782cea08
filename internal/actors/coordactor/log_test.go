package coordactor

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// A Reduce's answer is logged at Info ("reduce done"), or at Warn when it
// failed: a logger at Warn writes the failure, and drops the success
// without making its fields, which cost every small Reduce allocations
// for a line nobody reads.
func TestLogReplyMakesNothingForADroppedLine(t *testing.T) {
	var out bytes.Buffer
	l := logrus.New()
	l.SetOutput(&out)
	l.SetLevel(logrus.WarnLevel)
	req := &messages.Reduce{TargetId: "sum", SourceIds: []string{"a", "b"}, NumObjects: 2, TimeoutMs: 1000}
	c := &Coordinator{cfg: ActorConfig{Log: logrus.NewEntry(l)}, id: "sum#1",
		r: reduction.NewReduction("sum#1", req, reduction.Config{}, time.Now(), time.Second, time.Millisecond, 1e9)}
	ok := &messages.ReduceReply{TargetId: "sum", ReducedIds: []string{"a", "b"}}
	if n := testing.AllocsPerRun(100, func() { c.logReply(ok) }); n != 0 {
		t.Errorf("logging a success at Warn level allocated %v times, want none", n)
	}
	if out.Len() != 0 {
		t.Fatalf("a success was written at Warn level: %q", out.String())
	}
	c.logReply(&messages.ReduceReply{TargetId: "sum", Error: messages.Errorf(messages.ErrorCode_TIMEOUT, "too slow")})
	if !strings.Contains(out.String(), "reduce failed") || !strings.Contains(out.String(), "too slow") {
		t.Fatalf("a failure at Warn level wrote %q, want its reduce failed line", out.String())
	}
	out.Reset()
	l.SetLevel(logrus.InfoLevel)
	c.logReply(ok)
	if !strings.Contains(out.String(), "reduce done") || !strings.Contains(out.String(), "reduced=2") {
		t.Fatalf("a success at Info level wrote %q, want its reduce done line", out.String())
	}
}
