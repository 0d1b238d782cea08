package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// TestShellTour runs the README's tour of three hoplite node processes as
// printed: the node command lines (on free ports instead of 7001-7003 and
// 8001-8003), then the block of operator commands in sh.
func TestShellTour(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(readme), "### 3. Three `hoplite node` processes")
	if !ok {
		t.Fatal("README.md has no tour of hoplite node processes")
	}
	blocks := shBlock.FindAllStringSubmatch(tour, 2)
	if len(blocks) < 2 {
		t.Fatalf("the tour has %d sh blocks, want the nodes' and the commands'", len(blocks))
	}
	// The README's ports, mapped to free ones.
	var pairs []string
	for k := 1; k <= 3; k++ {
		bind := freePortPair(t) // its manage port is bind + 1000, as in the README
		pairs = append(pairs, ":700"+string(rune('0'+k)), ":"+strconv.Itoa(bind), ":800"+string(rune('0'+k)), ":"+strconv.Itoa(bind+1000))
	}
	ports := strings.NewReplacer(pairs...)
	bin := builtHoplite(t)

	nodes := strings.Split(strings.TrimSpace(blocks[0][1]), "\n")
	if len(nodes) != 3 {
		t.Fatalf("the tour starts %d nodes, want 3", len(nodes))
	}
	var first string
	logs := make([]*lockedBuffer, len(nodes))
	for i, line := range nodes {
		args := strings.Fields(ports.Replace(line))
		if args[0] != "hoplite" || args[1] != "node" {
			t.Fatalf("not a node command: %q", line)
		}
		cmd := exec.Command(bin, args[1:]...)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		stderr := &lockedBuffer{}
		logs[i] = stderr
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
		started := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if m := nodeStart.FindStringSubmatch(sc.Text()); m != nil {
					started <- m[2]
				}
			}
		}()
		select {
		case a := <-started:
			if i == 0 {
				first = a
			}
		case <-time.After(60 * time.Second):
			t.Fatalf("node %d did not start:\n%s", i, stderr.String())
		}
	}
	// As a reader in front of three terminals would: wait until the
	// members see one another.
	end := time.Now().Add(30 * time.Second)
	for {
		code, out, _ := cli(t, bin, nil, "members", "--addr", first)
		if code == 0 && strings.Count(out, "\n") == 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("members: %s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	sh := exec.CommandContext(ctx, "sh", "-e", "-c", ports.Replace(blocks[1][1]))
	sh.Env = append(os.Environ(), "PATH="+dirOf(bin)+":"+os.Getenv("PATH"))
	out, err := sh.CombinedOutput()
	if err != nil {
		for i, l := range logs {
			t.Logf("node %d's log:\n%s", i+1, l.String())
		}
		t.Fatalf("the tour's commands: %v\n%s", err, out)
	}
	for _, want := range []string{"hello, hoplite", "greeting", "made later", "reduced three: sum of 2 sources", "deleted greeting", "deleted later"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the tour's output lacks %q:\n%s", want, out)
		}
	}
}

// freePortPair is a loopback port p free now with p + 1000 free too.
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 100 {
		_, ps, _ := net.SplitHostPort(freeLoopback(t))
		p, _ := strconv.Atoi(ps)
		if p+1000 > 65535 {
			continue
		}
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+1000))); err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free pair of loopback ports p, p+1000")
	return 0
}

// lockedBuffer is a node's stderr, read while the process writes it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
