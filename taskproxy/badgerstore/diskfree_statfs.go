//go:build linux || darwin || freebsd || dragonfly

package badgerstore

import "golang.org/x/sys/unix"

// freeBytes is the space an unprivileged writer can still use on the
// filesystem of fd, an open file: asked of a descriptor, not of a path, the
// kernel looks no path up and the path is not copied for the call, on
// every write of the store. The fields' types differ between systems.
func freeBytes(fd int) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return 0, err
	}
	return blocksBytes(st.Bavail, uint64(st.Bsize)), nil //nolint:gosec // a block size, positive
}
