package moduletest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"
)

// modulePath is the path other modules import Hoplite by.
const modulePath = "github.com/hoplite-go/hoplite"

const (
	// goTimeout bounds one go command: with an empty build cache, a build
	// of the hoplite command compiles every dependency.
	goTimeout = 5 * time.Minute
	// programTimeout bounds a built program's run (each bounds its own
	// work more tightly).
	programTimeout = 2 * time.Minute
)

// moduleRoot is the checkout under test: the directory of the go.mod
// above the test's working directory (the package's).
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's working directory")
		}
		dir = parent
	}
}

// command runs name with args in dir, the environment extended by env
// (a later entry wins), and returns its standard output. A failure ends
// the test with both outputs.
func command(t *testing.T, timeout time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// GOWORK=off: a go.work above the temporary directories must not
	// turn a dependent back into a workspace member.
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	cmd.WaitDelay = 10 * time.Second // a child that keeps the pipes open
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s (in %s): %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), dir, err, stdout.String(), lastLines(stderr.String(), 60))
	}
	return stdout.String()
}

// goCommand runs the go command that runs the test ($GOROOT/bin leads
// the PATH go test gives its tests).
func goCommand(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	return command(t, goTimeout, dir, env, "go", args...)
}

// goEnv is the value of a go environment variable as the go command
// sees it.
func goEnv(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(goCommand(t, t.TempDir(), nil, "env", name))
}

// readModFile parses the go.mod at path.
func readModFile(t *testing.T, path string) *modfile.File {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// copyFile copies src to dst, making dst's directory.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// lastLines is the end of s: a failed build's errors come last, after
// its download lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"..."}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
