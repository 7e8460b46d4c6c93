package badgerstore

// blocksBytes is the bytes of blocks of size bytes each; a negative count
// (some systems report the blocks kept for the superuser as a deficit) is
// none.
func blocksBytes(blocks int64, size uint64) uint64 {
	if blocks <= 0 {
		return 0
	}
	return uint64(blocks) * size
}
