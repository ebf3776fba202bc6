//go:build unix

package fake

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time the process has used, so benchmarks can report
// their cost on a busy machine, where wall time is noisy.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
