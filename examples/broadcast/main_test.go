package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, out.String())
	}
	text := out.String()

	workers := map[string]bool{}
	receivers := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "worker on ") && strings.HasSuffix(line, "fetched 4194304 bytes, checksum ok") {
			workers[strings.Fields(line)[2]] = true
		}
		if r, s, ok := strings.Cut(strings.TrimSpace(line), " <- "); ok && strings.HasPrefix(line, "  ") {
			if r == s || r == "node-0" {
				t.Errorf("bad transfer line %q", line)
			}
			receivers[r] = true
		}
	}
	if len(workers) != 5 {
		t.Errorf("%d distinct workers reported, want 5:\n%s", len(workers), text)
	}
	if workers["node-0"] {
		t.Errorf("a worker ran on the creator's node:\n%s", text)
	}
	if !strings.Contains(text, "all 5 workers have weights-v1") {
		t.Errorf("no completion line:\n%s", text)
	}
	if len(receivers) != 5 {
		t.Errorf("transfer lines name %d distinct receivers, want 5:\n%s", len(receivers), text)
	}
}

// A context that is already over must make run fail, not hang or succeed.
func TestRunHonoursDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	cancel()
	var out bytes.Buffer
	if err := run(ctx, &out); err == nil {
		t.Fatalf("run with a canceled context succeeded:\n%s", out.String())
	}
}
