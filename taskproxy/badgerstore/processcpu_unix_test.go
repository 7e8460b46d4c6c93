//go:build unix

package badgerstore

import (
	"syscall"
	"testing"
	"time"
)

// processCPU is the CPU time (user and system) of this process so far.
func processCPU(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
