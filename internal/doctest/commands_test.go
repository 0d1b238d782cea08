package doctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// readmeCommands are the commands of README.md's "Two commands" block,
// without their comments.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Two commands\n")
	if !ok {
		t.Fatal(`README.md has no "## Two commands" section`)
	}
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal(`README.md's "Two commands" section has no sh block`)
	}
	var cmds []string
	for _, line := range strings.Split(strings.TrimSpace(block[1]), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		cmds = append(cmds, strings.TrimSpace(cmd))
	}
	return cmds
}

// CI runs the README's two commands as printed: .ci/run has each as a
// line of its own, so a green CI is a newcomer's green demo and tests.
func TestReadmeCommandsAreCIs(t *testing.T) {
	cmds := readmeCommands(t)
	if len(cmds) != 2 {
		t.Fatalf("README.md's two commands are %d: %q", len(cmds), cmds)
	}
	if cmds[0] != "go run ./cmd/hoplite demo" {
		t.Errorf("the first command is %q, want the embedded demo (go run ./cmd/hoplite demo)", cmds[0])
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(ci), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	for _, cmd := range cmds {
		if !slices.Contains(lines, cmd) {
			t.Errorf(".ci/run has no line that is the README's command %q: CI must run it as printed", cmd)
		}
	}
	// The test command runs from a fresh clone's root: a script there
	// must be committed and executable.
	if script := strings.Fields(cmds[1])[0]; strings.Contains(script, "/") {
		out, err := exec.Command("git", "-C", root, "ls-files", "-s", script).Output()
		if err != nil || !strings.HasPrefix(string(out), "100755 ") {
			t.Errorf("the test command's script %s is not committed as executable (git ls-files -s: %q, %v)", script, out, err)
		}
	}
}
