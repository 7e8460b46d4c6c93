package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The disk guard. Badger maps its memtable, value-log and table files into
// memory and extends them sparsely: on a filesystem that is full or has
// turned read-only, its next write to a fresh page is a SIGBUS, which ends
// the whole Caddy process. So before every write the store checks the
// filesystem itself: a write is refused, as task.ErrUnavailable, while
// less than MinFreeBytes are free (room for Badger's own flushes and
// compactions of what it already took) or while a one-byte write to a
// probe file fails (a filesystem the kernel turned read-only after an
// error still reports itself writable). Reads go on; the writes the
// gateway keeps retrying (a task's outcome) go through once the
// filesystem has room and is writable again.

// DefaultMinFreeBytes is the free space below which an on-disk store
// refuses writes unless configured: a flush of a full memtable and a
// compaction of the first level with room to spare.
const DefaultMinFreeBytes = 64 << 20

// probeFile is the file the guard writes to, in the store's directory.
const probeFile = "WRITABLE"

// ErrDiskFull means the store's filesystem has less free space than the
// store keeps in reserve; it is also task.ErrUnavailable.
var ErrDiskFull = fmt.Errorf("%w: the store's filesystem is full", task.ErrUnavailable)

// ErrReadOnly means the store's filesystem refuses writes; it is also
// task.ErrUnavailable.
var ErrReadOnly = fmt.Errorf("%w: the store's filesystem is read-only", task.ErrUnavailable)

// diskGuard checks the store's filesystem before writes.
type diskGuard struct {
	dir     string
	minFree uint64
	mu      sync.Mutex // serializes the probe's writes
	probe   *os.File
	// probeFD is the probe's descriptor, which the free space is asked of
	// (the probe lies in dir, on dir's filesystem).
	probeFD int
}

// newDiskGuard opens the probe file in dir; minFree 0 means
// DefaultMinFreeBytes and a negative one checks only writability.
func newDiskGuard(dir string, minFree int64) (*diskGuard, error) {
	f, err := os.OpenFile(filepath.Join(dir, probeFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the store's write probe: %w", err)
	}
	if _, err := f.WriteAt([]byte{0}, 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("writing the store's write probe: %w", err)
	}
	switch {
	case minFree == 0:
		minFree = DefaultMinFreeBytes
	case minFree < 0:
		minFree = 0
	}
	return &diskGuard{dir: dir, minFree: uint64(minFree), probe: f, probeFD: int(f.Fd())}, nil
}

// check returns nil when a write may go ahead, else ErrDiskFull or
// ErrReadOnly with the figures. A nil guard (a store in memory) allows
// every write.
func (g *diskGuard) check() error {
	if g == nil {
		return nil
	}
	if err := g.writable(); err != nil {
		return err
	}
	if g.minFree == 0 {
		return nil
	}
	free, err := freeBytes(g.probeFD)
	if err != nil {
		if errors.Is(err, errFreeUnknown) {
			return nil
		}
		return fmt.Errorf("%w: checking the free space of %s: %w", task.ErrUnavailable, g.dir, err)
	}
	if free < g.minFree {
		return fmt.Errorf("%w (%s: %d bytes free, the store keeps %d in reserve)", ErrDiskFull, g.dir, free, g.minFree)
	}
	return nil
}

// writable returns nil when the probe file takes a write, else
// ErrReadOnly with the cause. A nil guard allows every write.
func (g *diskGuard) writable() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	_, err := g.probe.WriteAt(probeByte[:], 0)
	g.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%w (%s: %w)", ErrReadOnly, g.dir, err)
	}
	return nil
}

// close closes the probe file.
func (g *diskGuard) close() {
	if g != nil {
		_ = g.probe.Close()
	}
}

// probeByte is what the probe writes: a slice made per write would be an
// allocation of its own.
var probeByte = [1]byte{1}

// errFreeUnknown means the platform cannot tell the free space.
var errFreeUnknown = errors.New("free space unknown on this platform")

// CheckWritable reports whether the store would take a write now: nil, or
// ErrDiskFull or ErrReadOnly with the figures (task.WriteChecker, for
// health checks). A store in memory always would.
func (s *Store) CheckWritable() error { return s.use(s.guard.check) }

var _ task.WriteChecker = (*Store)(nil)
