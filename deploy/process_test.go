package deploy

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
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The image's binaries, as the Dockerfile installs them, and where the
// tests build them.
const (
	imageHoplite = "/usr/local/bin/hoplite"
	imageProbe   = "/usr/local/bin/hoplite-probe"
)

var (
	buildOnce sync.Once
	buildErr  error
	binDir    string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hoplite-deploy-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// binaries builds hoplite (from the main module, ../) and hoplite-probe
// once, and maps the image's paths of them to the built files.
func binaries(t *testing.T) map[string]string {
	t.Helper()
	buildOnce.Do(func() {
		for _, b := range []struct{ dir, pkg, out string }{{"..", "./cmd/hoplite", "hoplite"}, {".", "./cmd/hoplite-probe", "hoplite-probe"}} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, b.out), b.pkg)
			cmd.Dir = b.dir
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as the Dockerfile builds them
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return map[string]string{imageHoplite: filepath.Join(binDir, "hoplite"), imageProbe: filepath.Join(binDir, "hoplite-probe")}
}

// loopbackHosts returns n distinct addresses 127.0.0.x on which every
// one of ports is free: each stands for a pod's or a host's IP, so that
// members keep the ports the manifests give them, as on separate hosts.
func loopbackHosts(t *testing.T, n int, ports ...int) []string {
	t.Helper()
	var hosts []string
	used := map[int]bool{}
	for tries := 0; len(hosts) < n; tries++ {
		if tries > 200 {
			t.Fatalf("no %d loopback addresses with ports %v free", n, ports)
		}
		x := 2 + rand.IntN(250)
		if used[x] {
			continue
		}
		host := "127.0.0." + strconv.Itoa(x)
		free := true
		for _, p := range ports {
			ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
			if err != nil {
				free = false
				break
			}
			ln.Close()
		}
		if free {
			used[x] = true
			hosts = append(hosts, host)
		}
	}
	return hosts
}

// startLine is what `hoplite node` prints once it has joined.
var startLine = regexp.MustCompile(`^hoplite node (\S+) address=(\S+) .*members=(\d+)`)

// node is a running `hoplite node` process.
type node struct {
	cmd     *exec.Cmd
	members int           // as its start line says
	stdout  *syncBuffer   // every line
	stderr  *syncBuffer   // its log
	exited  chan struct{} // closed when it exits
	err     error         // its exit, once exited is closed
}

// startNode runs argv with env (added to this process's) and waits for
// its start line; the test's end kills it.
func startNode(t *testing.T, argv, env []string) *node {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	n := &node{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stderr = n.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			n.stdout.Write([]byte(sc.Text() + "\n"))
			if m := startLine.FindStringSubmatch(sc.Text()); m != nil {
				k, _ := strconv.Atoi(m[3])
				started <- k
			}
		}
		n.err = cmd.Wait()
		close(n.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-n.exited
		if t.Failed() {
			t.Logf("%q\nstdout:\n%s\nstderr:\n%s", argv, n.stdout.String(), n.stderr.String())
		}
	})
	select {
	case n.members = <-started:
	case <-n.exited:
		t.Fatalf("%q exited before joining: %v\n%s", argv, n.err, n.stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("%q printed no start line in 90 s:\n%s", argv, n.stderr.String())
	}
	return n
}

// stop sends SIGTERM, as Kubernetes and systemd do, and returns the
// exit's error, or fails the test if the process outlives grace.
func (n *node) stop(t *testing.T, grace time.Duration) error {
	t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.exited:
		return n.err
	case <-time.After(grace):
		t.Fatalf("still running %v after SIGTERM, when it would be killed", grace)
		return nil
	}
}

// run runs argv with env and returns its exit error and output; it is
// given 30 s.
func run(t *testing.T, argv, env []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// syncBuffer is a process's output, read while it is written.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
