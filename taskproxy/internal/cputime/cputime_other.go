//go:build !unix && !windows

package cputime

import "time"

// Process is not supported on this system.
func Process() (time.Duration, error) { return 0, ErrUnsupported }
