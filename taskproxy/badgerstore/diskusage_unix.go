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
