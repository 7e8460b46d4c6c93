//go:build !unix

package badgerstore

import "io/fs"

// allocated is the length of the file where the allocated size is unknown.
func allocated(info fs.FileInfo) int64 { return info.Size() }

// freeBytes cannot tell the free space here: the guard checks only that
// the filesystem takes writes.
func freeBytes(int) (uint64, error) { return 0, errFreeUnknown }
