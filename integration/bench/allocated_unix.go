//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// allocated is the disk space a file takes, in allocated blocks as du
// counts them: Badger's files are sparse until written.
func allocated(info fs.FileInfo) int64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return 0
}
