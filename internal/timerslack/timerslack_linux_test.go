package timerslack

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// childEnv makes the test binary the program Ensure executes again (see
// TestMain).
const childEnv = "HOPLITE_TIMERSLACK_TEST_CHILD"

const childSlack = 3 * time.Millisecond

// TestMain in a child: print the process id, Ensure the slack (which
// executes the binary again: the same process id prints twice), then the
// slack of threads started afterwards, one per goroutine locked to it.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "" {
		os.Exit(m.Run())
	}
	fmt.Printf("pid %d\n", os.Getpid())
	if err := Ensure(childSlack); err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 {
		wg.Go(func() {
			runtime.LockOSThread() // a goroutine that exits locked takes its thread with it
			d, err := Current()
			mu.Lock()
			defer mu.Unlock()
			fmt.Printf("thread %v %v\n", d, err)
		})
	}
	wg.Wait()
	os.Exit(0)
}

// Ensure gives the slack to the process, keeps its id, and executes the
// program only once: the second run finds the slack set.
func TestEnsureExecutesOnceWithTheSlack(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var pids, threads []string
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "pid "):
			pids = append(pids, l)
		case strings.HasPrefix(l, "thread "):
			threads = append(threads, l)
		}
	}
	if len(pids) != 2 || pids[0] != pids[1] {
		t.Fatalf("want the same process id before and after executing again, once: %q", pids)
	}
	if len(threads) != 4 {
		t.Fatalf("want 4 threads' slack, got %q", lines)
	}
	for _, l := range threads {
		if l != fmt.Sprintf("thread %v <nil>", childSlack) {
			t.Errorf("%s, want %v", l, childSlack)
		}
	}
}

// A process that already has the slack, or asks for none, goes on at once.
func TestEnsureWithTheSlackSetDoesNothing(t *testing.T) {
	if err := Ensure(0); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cur, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := Ensure(cur); err != nil { // would execute the test binary again if it did not see cur
		t.Fatal(err)
	}
}
