//go:build !unix

package localexec

import (
	"os"
	"syscall"
)

// On systems without process groups only the command itself is stopped.
const waitNoReap = false

func sysProcAttr() *syscall.SysProcAttr { return nil }

func waitExited(int) {}

func killGroup(pid int, sig syscall.Signal) {
	if sig != syscall.SIGKILL && sig != syscall.SIGTERM {
		return
	}
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}
