//go:build unix && !linux

package localexec

import "syscall"

// waitNoReap is false: without waitid(WNOWAIT) the exit is observed by
// exec.Cmd.Wait, which reaps the process.
const waitNoReap = false

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func waitExited(int) {}

// killGroup signals the process group pgid, ignoring a group that is gone.
func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}
