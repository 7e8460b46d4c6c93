package badgerstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotDirectory is the error of a store directory, or a directory above
// it, that exists and is not a directory.
var ErrNotDirectory = errors.New("not a directory")

// ErrTakesNoFiles is the error of a store directory below an existing
// directory that answers a new file with "no such file": a virtual
// filesystem such as /proc, which no retry will make writable.
var ErrTakesNoFiles = errors.New("the filesystem there takes no new files")

// CheckDir reports whether dir can hold a store, without opening or
// locking anything: dir, or the nearest directory above it that exists
// (Open's caller creates what is missing), must be a directory in which
// this process can create a file. It creates one there and removes it at
// once. Its error, like Open's, tells with Permanent whether trying again
// can help.
func CheckDir(dir string) error {
	at := filepath.Clean(dir)
	for {
		info, err := os.Stat(at)
		switch {
		case err == nil && !info.IsDir():
			return fmt.Errorf("badgerstore: %s: %w", at, ErrNotDirectory)
		case err == nil:
			f, err := os.CreateTemp(at, ".mcp_tasks-write-check-*")
			if errors.Is(err, fs.ErrNotExist) && isDir(at) { // it still exists: only a virtual filesystem says this
				return fmt.Errorf("badgerstore: creating a file in %s: %w (%w)", at, ErrTakesNoFiles, err)
			}
			if err != nil {
				return fmt.Errorf("badgerstore: creating a file in %s: %w", at, err)
			}
			name := f.Name()
			_ = f.Close()
			return os.Remove(name)
		case errors.Is(err, fs.ErrNotExist) && filepath.Dir(at) != at:
			at = filepath.Dir(at)
		default:
			return fmt.Errorf("badgerstore: %w", err)
		}
	}
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// Permanent reports whether err, from CheckDir or from creating and opening
// the store's directory, will come again on every try until an operator
// changes the configuration or the filesystem, and if so what to do: a
// path through something that is not a directory, no permission, a
// read-only filesystem. A full disk, an I/O error or the directory locked
// by another process may pass, and are not.
func Permanent(err error) (fix string, permanent bool) {
	switch {
	case err == nil:
		return "", false
	case errors.Is(err, ErrNotDirectory), errors.Is(err, syscall.ENOTDIR):
		return "point the storage directory at a directory (or a path that can be created as one), not at a file", true
	case errors.Is(err, ErrTakesNoFiles):
		return "point the storage directory at a real, writable filesystem (not /proc or a similar virtual one)", true
	case errors.Is(err, syscall.EROFS):
		return "point the storage directory at a writable filesystem, or mount this one read-write", true
	case errors.Is(err, fs.ErrPermission):
		return "let the user Caddy runs as create and write files there (chown or chmod), or point the storage directory elsewhere", true
	case errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		return "point the storage directory at a shorter path without symbolic link loops", true
	}
	return "", false
}
