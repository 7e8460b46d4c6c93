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

// freeBytes is the space of dir's filesystem an unprivileged writer can
// still use.
func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}
