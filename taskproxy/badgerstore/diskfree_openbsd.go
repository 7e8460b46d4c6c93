package badgerstore

import "golang.org/x/sys/unix"

// freeBytes is the space an unprivileged writer can still use on the
// filesystem of fd, an open file (OpenBSD names statfs' fields f_*).
func freeBytes(fd int) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return 0, err
	}
	return blocksBytes(st.F_bavail, uint64(st.F_bsize)), nil
}
