//go:build windows

package cputime

import (
	"fmt"
	"syscall"
	"time"
)

// Process is the CPU time (user and kernel) of this process so far.
func Process() (time.Duration, error) {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0, fmt.Errorf("GetCurrentProcess: %w", err)
	}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0, fmt.Errorf("GetProcessTimes: %w", err)
	}
	return filetimeSpan(kernel) + filetimeSpan(user), nil
}

// filetimeSpan is a FILETIME that holds a span, not an instant: a count
// of 100-nanosecond intervals (Filetime.Nanoseconds would take it for a
// time since 1601 and subtract the years to 1970).
func filetimeSpan(ft syscall.Filetime) time.Duration {
	return time.Duration(uint64(ft.HighDateTime)<<32|uint64(ft.LowDateTime)) * 100
}
