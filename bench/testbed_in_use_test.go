package bench

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTestbedRefusesOneInUse: bringing a testbed up replaces a leftover
// of the same prefix, but not one whose hosts run processes: that is
// another run's, and replacing it killed that run's members
// mid-measurement. Its run's command never starts, and the testbed in
// use is left as it was.
func TestTestbedRefusesOneInUse(t *testing.T) {
	script, prefix, net := upTestbed(t, 2)
	flags := []string{"--hosts", "2", "--prefix", prefix, "--net", strconv.Itoa(net)}
	busy := exec.Command(script, "exec", "--prefix", prefix, "1", "--", "sleep", "60")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, _ := exec.Command("ip", "netns", "pids", prefix+"-h1").Output()
		if strings.TrimSpace(string(out)) != "" {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the process in host 1 did not start within 10 s")
		}
	}
	for _, args := range [][]string{append([]string{"up"}, flags...), append(append([]string{"run"}, flags...), "--", "true")} {
		out, err := exec.Command(script, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "in use") {
			t.Fatalf("testbed %s over a testbed in use: %v\n%s; want it refused as in use", args[0], err, out)
		}
	}
	if busy.ProcessState != nil {
		t.Fatal("the process in the testbed in use was stopped")
	}
	if out, err := exec.Command("ip", "netns", "pids", prefix+"-h1").Output(); err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("host 1 after the refusals: pids %q, %v; want its process still there", out, err)
	}
	_ = busy.Process.Kill()
	_ = busy.Wait()
	// A leftover with nothing running is replaced.
	if out, err := exec.Command(script, append([]string{"up"}, flags...)...).CombinedOutput(); err != nil {
		t.Fatalf("testbed up over a leftover: %v\n%s", err, out)
	}
}
