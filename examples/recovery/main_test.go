package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 45*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	text := out.String()
	// Every kind of recovery event was printed as a line by the monitor.
	for kind, line := range map[string]*regexp.Regexp{
		"NodeFailed":           regexp.MustCompile(`\[NodeFailed\] node-1 failed \(seen by [^)]+\)`),
		"SenderSwitched":       regexp.MustCompile(`\[SenderSwitched\] node-2 switched sender node-1 → node-0 at 8 MiB of weights-v1`),
		"ShardRebuilt":         regexp.MustCompile(`\[ShardRebuilt\] directory shard-1 restarted on node-\d+`),
		"TreeNodeReplaced":     regexp.MustCompile(`\[TreeNodeReplaced\] reduce sum: position \d+ lost R2, `),
		"AncestorsInvalidated": regexp.MustCompile(`\[AncestorsInvalidated\] reduce sum: ancestors \[[\d ]+\] cleared`),
		"ReduceDone":           regexp.MustCompile(`\[ReduceDone\] reduce sum done in \S+: reduced \[(R\d ?){6}\]`),
	} {
		if !line.MatchString(text) {
			t.Errorf("no %s line matching %q:\n%s", kind, line, text)
		}
	}
	// Two failures of node-1: one mid-broadcast, one mid-reduce.
	if n := len(regexp.MustCompile(`\[NodeFailed\] node-1(#\d+)? failed`).FindAllString(text, -1)); n != 2 {
		t.Errorf("node-1 failed %d times in the output, want 2:\n%s", n, text)
	}
	for _, want := range []string{
		"all 6 live receivers have the same 16777216 bytes (verified)",
		"node-1 restarted empty and fetched weights-v1 again (verified)",
		"R2 is out, every source counted once; 1048576 int64s verified element by element",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no verification line %q:\n%s", want, text)
		}
	}
	// The events are printed as they happen: node-1's failure comes after
	// the narrative announced the kill and before the broadcast finished.
	kill := strings.Index(text, "killing node-1: node-2 streams")
	failed := strings.Index(text, "[NodeFailed] node-1 failed")
	verified := strings.Index(text, "all 6 live receivers")
	if kill < 0 || !(kill < failed && failed < verified) {
		t.Errorf("events out of order (kill at %d, NodeFailed at %d, verified at %d):\n%s", kill, failed, verified, text)
	}
	// The reduce result names R1, R3..R7 (R2 was lost) in its summary.
	summary := regexp.MustCompile(`sum = (R\d)\+(R\d)\+(R\d)\+(R\d)\+(R\d)\+(R\d): R2 is out`).FindStringSubmatch(text)
	if summary == nil {
		t.Fatalf("no reduce summary:\n%s", text)
	}
	got := map[string]bool{}
	for _, id := range summary[1:] {
		got[id] = true
	}
	for _, id := range []string{"R1", "R3", "R4", "R5", "R6", "R7"} {
		if !got[id] {
			t.Errorf("reduce summary %q lacks %s", summary[0], id)
		}
	}
}

// A context that is already over must make run fail, not hang or succeed.
func TestRunHonoursDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err == nil {
		t.Fatalf("run with a canceled context succeeded:\n%s", out.String())
	}
}
