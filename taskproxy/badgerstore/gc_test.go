package badgerstore

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// vlogDiskBytes is the disk space the value-log files of dir take (blocks
// allocated, not the apparent size Badger preallocates).
func vlogDiskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			continue // deleted by GC meanwhile
		}
		n += allocated(fi)
	}
	return n
}

// The space of swept tasks comes back: value-log GC runs on a schedule,
// not only right after a sweep that deleted something, so after a restart
// (which seals the value log the tasks were written to) it is reclaimed
// though no sweep finds anything left to delete.
func TestScheduledGCReclaimsSweptTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now().Add(-2 * time.Hour)
	blob := json.RawMessage(`{"arguments":{"blob":"` + strings.Repeat("x", 10<<10) + `"}}`)
	for range 2000 {
		tk := testTask("alice", t0)
		tk.Params = blob
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.Sweep(ctx, time.Now(), 500); err != nil || n != 2000 {
		t.Fatalf("swept %d, %v; want 2000", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := vlogDiskBytes(t, dir)
	if before < 20<<20 {
		t.Fatalf("2000 tasks of 10 KB take %d bytes of value log, want over 20 MB", before)
	}

	s, err = Open(Options{Dir: dir, GCInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.Sweep(ctx, time.Now(), 500); err != nil || n != 0 {
		t.Fatalf("second sweep deleted %d, %v; want nothing left", n, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	after := vlogDiskBytes(t, dir)
	for after > before/2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		after = vlogDiskBytes(t, dir)
	}
	if after > before/2 {
		t.Errorf("value log still takes %d bytes after scheduled GC, %d before: not reclaimed", after, before)
	}
	t.Logf("value log: %d bytes before, %d after", before, after)
}
