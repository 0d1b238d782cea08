//go:build linux

package member

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes a member process die with the test process, even when
// the test binary is killed (a test timeout skips t.Cleanup).
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
