//go:build !(linux || darwin || freebsd || dragonfly || openbsd || netbsd || solaris || illumos)

package badgerstore

// freeBytes cannot tell the free space here: the guard checks only that
// the filesystem takes writes.
func freeBytes(int) (uint64, error) { return 0, errFreeUnknown }
