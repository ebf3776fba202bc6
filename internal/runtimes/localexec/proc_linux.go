package localexec

import (
	"syscall"
	"unsafe"
)

// waitNoReap: waitExited waits for the exit without reaping the process.
const waitNoReap = true

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitExited blocks until process pid has exited, leaving it a zombie
// (WNOWAIT) for exec.Cmd.Wait to reap.
func waitExited(pid int) {
	const pPID = 1      // P_PID
	var info [16]uint64 // siginfo_t is 128 bytes
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0) //nolint:gosec // G103: the siginfo buffer for waitid, as os/exec does
		if errno != syscall.EINTR {
			return
		}
	}
}

// killGroup signals the process group pgid, ignoring a group that is gone.
func killGroup(pgid int, sig syscall.Signal) {
	if pgid > 0 {
		_ = syscall.Kill(-pgid, sig)
	}
}
