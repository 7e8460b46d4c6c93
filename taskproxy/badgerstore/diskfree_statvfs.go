//go:build netbsd || solaris || illumos

package badgerstore

import "golang.org/x/sys/unix"

// freeBytes is the space an unprivileged writer can still use on the
// filesystem of fd, an open file (these systems answer statvfs, not
// statfs).
func freeBytes(fd int) (uint64, error) {
	var st unix.Statvfs_t
	if err := unix.Fstatvfs(fd, &st); err != nil {
		return 0, err
	}
	return blocksBytes(st.Bavail, uint64(st.Frsize)), nil //nolint:gosec // a block size, positive
}
