//go:build !unix

package iacrun

// openNonblock is zero where FIFOs cannot block an open.
const openNonblock = 0
