//go:build linux

package stallwatch

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// The watch records a stop of the whole process that it sleeps through.
func TestStartRecordsAStopOfTheProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	w := Start(ctx)
	from := time.Now()
	// A child stops this process and continues it 600 ms later, as a
	// machine that stops every process would.
	pid := os.Getpid()
	stop := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("kill -STOP %d; sleep 0.6; kill -CONT %d", pid, pid))
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("stop and continue the test process: %v: %s", err, out)
	}
	for ctx.Err() == nil {
		if d := w.Within(from, time.Now()); d >= 300*time.Millisecond {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("a 600 ms stop of every goroutine recorded as %v of stall", w.Within(from, time.Now()))
}
