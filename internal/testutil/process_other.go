//go:build !unix

package testutil

import (
	"os"
	"os/exec"
)

func newProcessGroup(*exec.Cmd) {}

func terminate(p *os.Process) error { return p.Kill() }
func kill(p *os.Process) error      { return p.Kill() }
