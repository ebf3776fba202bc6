//go:build !linux

package compiler

import (
	"syscall"
	"time"
)

// limitRenderer sets only the renderer's soft memory limit: other systems
// have no hard limit of a process's memory that the Go runtime respects.
// Its parent still kills it after its time, and a render that takes the
// memory it finds ends the child, not the server.
func limitRenderer(maxMemory int, _ time.Duration) error {
	setSoftMemoryLimit(maxMemory)
	return nil
}

func rendererProcAttr() *syscall.SysProcAttr { return nil }

func killedBy(error) rendererFailure { return failedNot }
