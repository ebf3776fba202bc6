//go:build !unix

package fake

import "time"

func cpuTime() time.Duration { return 0 }
