//go:build unix

package iacrun

import "golang.org/x/sys/unix"

// openNonblock keeps open(2) from blocking on a FIFO.
const openNonblock = unix.O_NONBLOCK
