//go:build windows

package badgerstore

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time (user and kernel) of this process so far.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		b.Fatal(err)
	}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		b.Fatal(err)
	}
	return filetimeSpan(kernel) + filetimeSpan(user)
}

// filetimeSpan is a FILETIME that holds a span, not an instant: a count
// of 100-nanosecond intervals (Filetime.Nanoseconds would take it for a
// time since 1601 and subtract the years to 1970).
func filetimeSpan(ft syscall.Filetime) time.Duration {
	return time.Duration(uint64(ft.HighDateTime)<<32|uint64(ft.LowDateTime)) * 100
}
