//go:build !unix

package config

// openNonblock is zero where FIFOs cannot block an open.
const openNonblock = 0
