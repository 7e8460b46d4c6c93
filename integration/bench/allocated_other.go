//go:build !unix

package main

import "io/fs"

// allocated is the length of the file where the allocated size is unknown.
func allocated(info fs.FileInfo) int64 { return info.Size() }
