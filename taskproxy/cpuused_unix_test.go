//go:build unix

package taskproxy

import (
	"syscall"
	"testing"
	"time"
)

// cpuUsed is the CPU time (user and system) of this process so far.
func cpuUsed(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
