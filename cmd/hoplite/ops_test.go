package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// builtHoplite builds this command once per test run (tests that start
// processes: members, benchmark peers).
func builtHoplite(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hoplite-cmd-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "hoplite")
		// -buildvcs=auto: stamped with the revision in a clone, whatever
		// GOFLAGS says (TestVersionOfABuiltBinary reads it back).
		if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	a, err := testutil.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

var nodeStart = regexp.MustCompile(`^hoplite node (\S+) address=(\S+) `)

// startMembers starts n `hoplite node` processes with extra flags and
// returns their addresses once every one printed its start line.
func startMembers(t *testing.T, bin string, n int, extra ...string) []string {
	t.Helper()
	var binds, manage []string
	for range n {
		binds, manage = append(binds, freeLoopback(t)), append(manage, freeLoopback(t))
	}
	var addrs []string
	for i := range n {
		_, mport, _ := net.SplitHostPort(manage[i])
		cmd := exec.Command(bin, append([]string{"node", "-bind", binds[i], "-manage-port", mport,
			"-seeds", strings.Join(manage, ","), "-log-format", "json"}, extra...)...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		line := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if m := nodeStart.FindStringSubmatch(sc.Text()); m != nil {
					line <- m[2]
				}
			}
		}()
		select {
		case a := <-line:
			addrs = append(addrs, a)
		case <-time.After(60 * time.Second):
			t.Fatalf("member %d did not start:\n%s", i, stderr.String())
		}
	}
	return addrs
}

// cli runs the built binary with stdin and returns exit code and outputs.
func cli(t *testing.T, bin string, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return code, stdout.String(), stderr.String()
}

// TestOperatorCommands: put, get, ls, stat, members, status and rm from a
// shell against three `hoplite node` processes; bad input exits non-zero
// with the typed error.
func TestOperatorCommands(t *testing.T) {
	bin := builtHoplite(t)
	addrs := startMembers(t, bin, 3, "-capacity", "8MiB")
	a, b := "--addr="+addrs[0], "--addr="+addrs[2]
	// The members greet each other after their start lines: wait until
	// the dialed one lists all three.
	end := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := cli(t, bin, nil, "members", a)
		if code == 0 && strings.Count(out, "\n") == 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("members: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "in.bin")
	data := make([]byte, 3<<20+5)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := cli(t, bin, nil, "put", a, "from-file", file); code != 0 || !strings.Contains(out, "put from-file (3145733 bytes)") {
		t.Fatalf("put from a file: exit %d, %s %s", code, out, errs)
	}
	if code, _, errs := cli(t, bin, []byte("hello from stdin"), "put", a, "from-stdin"); code != 0 {
		t.Fatalf("put from stdin: exit %d, %s", code, errs)
	}
	// Get through another member: the bytes cross the data plane.
	if code, out, errs := cli(t, bin, nil, "get", b, "from-file"); code != 0 || out != string(data) {
		t.Fatalf("get to stdout: exit %d, %d bytes, %s", code, len(out), errs)
	}
	got := filepath.Join(dir, "out.bin")
	if code, _, errs := cli(t, bin, nil, "get", b, "from-stdin", got); code != 0 {
		t.Fatalf("get to a file: exit %d, %s", code, errs)
	}
	if g, err := os.ReadFile(got); err != nil || string(g) != "hello from stdin" {
		t.Fatalf("get to a file wrote %q, %v", g, err)
	}
	code, out, errs := cli(t, bin, nil, "ls", b)
	if code != 0 || !strings.Contains(out, "from-file") || !strings.Contains(out, "from-stdin") || !strings.Contains(out, "3145733") {
		t.Fatalf("ls: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cli(t, bin, nil, "stat", b, "from-file")
	if code != 0 || !strings.Contains(out, "size 3145733") || strings.Count(out, "COMPLETE") < 2 {
		t.Fatalf("stat: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cli(t, bin, nil, "status", a)
	// The capacity column: a measured bandwidth such as "188.0 MiB/s" must
	// not count.
	if code != 0 || !strings.Contains(out, "3 members, 64 directory shards") || len(capacityCell.FindAllString(out, -1)) != 3 {
		t.Fatalf("status: exit %d\n%s%s", code, out, errs)
	}

	// Bad input: a file larger than the member's capacity is refused
	// whole; a missing id is NOT_FOUND; an address that is not a member.
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, make([]byte, 12<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli(t, bin, nil, "put", a, "too-big", big); code != 1 || !strings.Contains(errs, "CAPACITY") {
		t.Fatalf("put of 12 MiB on an 8 MiB member: exit %d, %s", code, errs)
	}
	if _, out, _ := cli(t, bin, nil, "ls", a); strings.Contains(out, "too-big") {
		t.Fatalf("a refused put is listed:\n%s", out)
	}
	if code, _, errs := cli(t, bin, nil, "get", a, "never-put"); code != 1 || !strings.Contains(errs, "NOT_FOUND") {
		t.Fatalf("get of a missing id: exit %d, %s", code, errs)
	}
	if code, _, errs := cli(t, bin, nil, "members", "--addr", freeLoopback(t), "--timeout", "2s"); code != 1 || !strings.Contains(errs, "UNAVAILABLE") {
		t.Fatalf("an address that is not a member: exit %d, %s", code, errs)
	}
	if code, _, errs := cli(t, bin, nil, "get", a); code != 2 || !strings.Contains(errs, "want ID [FILE]") {
		t.Fatalf("get without an id: exit %d, %s", code, errs)
	}
	if code, _, errs := cli(t, bin, nil, "ls", a, "--limit", "0"); code != 2 || !strings.Contains(errs, "--limit 0") {
		t.Fatalf("ls --limit 0: exit %d, %s", code, errs)
	}

	if code, out, errs := cli(t, bin, nil, "rm", b, "from-file", "from-stdin"); code != 0 || strings.Count(out, "deleted") != 2 {
		t.Fatalf("rm: exit %d, %s %s", code, out, errs)
	}
	if code, _, errs := cli(t, bin, nil, "get", a, "from-file"); code != 1 || !strings.Contains(errs, "DELETED") {
		t.Fatalf("get after rm: exit %d, %s", code, errs)
	}
	if _, out, _ := cli(t, bin, nil, "version"); !strings.HasPrefix(out, "hoplite ") {
		t.Fatalf("version: %q", out)
	}
}

// capacityCell is an 8 MiB capacity in the status table: a whole cell.
var capacityCell = regexp.MustCompile(`(?m)(^|\s)8\.0 MiB(\s|$)`)
