//go:build !unix

package terraform

// openNonblock is zero where FIFOs cannot block an open.
const openNonblock = 0
