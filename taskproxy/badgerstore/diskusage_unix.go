//go:build unix

package badgerstore

import (
	"io/fs"
	"syscall"
)

// allocated is the disk space a file takes: Badger preallocates its value
// log and memtable files sparsely, so their length overstates it.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return info.Size()
}

// freeBytes is the space an unprivileged writer can still use on the
// filesystem of fd, an open file: asked of a descriptor, not of a path, the
// kernel looks no path up and the path is not copied for the call, on
// every write of the store.
func freeBytes(fd int) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
