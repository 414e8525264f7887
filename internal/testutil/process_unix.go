//go:build unix

package testutil

import (
	"os"
	"os/exec"
	"syscall"
)

func newProcessGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// The process leads its group: its pid is the group's id.
func terminate(p *os.Process) error { return syscall.Kill(-p.Pid, syscall.SIGTERM) }
func kill(p *os.Process) error      { return syscall.Kill(-p.Pid, syscall.SIGKILL) }
