package badgerstore

import "math"

// blocksBytes is the bytes of blocks of size bytes each, blocks of
// whatever integer type the system's statfs or statvfs gives. A negative
// count (some systems report the blocks kept for the superuser as a
// deficit) is none; a product beyond uint64 (a filesystem that reports an
// unlimited or bogus count, as some network and FUSE filesystems do) is
// the most uint64 holds, never a wrapped-around small figure that would
// refuse every write as a full disk.
func blocksBytes[T ~int32 | ~int64 | ~uint32 | ~uint64](blocks T, size uint64) uint64 {
	if blocks <= 0 {
		return 0
	}
	n := uint64(blocks)
	if size != 0 && n > math.MaxUint64/size {
		return math.MaxUint64
	}
	return n * size
}
