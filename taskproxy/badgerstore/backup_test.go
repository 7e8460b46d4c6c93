package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A backup of an open store, taken while tasks are written, restores into
// a new directory that opens as a store with the tasks of the backup.
func TestBackupRestore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, err := Open(Options{Dir: filepath.Join(t.TempDir(), "src"), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	var kept []*task.Task
	for i := range 50 {
		tk := testTask("alice", time.Now().Add(time.Duration(i)*time.Millisecond))
		if err := src.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, tk)
	}
	// Writes go on during the backup; they do not break it.
	writing := make(chan error, 1)
	go func() {
		for range 50 {
			if err := src.Create(ctx, testTask("bob", time.Now())); err != nil {
				writing <- err
				return
			}
		}
		writing <- nil
	}()
	var backup bytes.Buffer
	if err := src.Backup(ctx, &backup); err != nil {
		t.Fatal(err)
	}
	if err := <-writing; err != nil {
		t.Fatal(err)
	}

	dir := filepath.Join(t.TempDir(), "restored")
	if err := Restore(dir, bytes.NewReader(backup.Bytes()), nil); err != nil {
		t.Fatal(err)
	}
	restored, err := Open(Options{Dir: dir, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = restored.Close() })
	for _, tk := range kept {
		got, err := restored.Get(ctx, "alice", tk.ID)
		if err != nil || got.ID != tk.ID || got.Status != task.StatusWorking {
			t.Fatalf("restored Get(%s) = %+v, %v", tk.ID, got, err)
		}
	}

	// A restore never merges into a directory that holds something.
	if err := Restore(dir, bytes.NewReader(backup.Bytes()), nil); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("restore into a used directory: %v", err)
	}
	// What is no backup of a task store is refused.
	if err := Restore(filepath.Join(t.TempDir(), "empty"), bytes.NewReader(nil), nil); err == nil || !strings.Contains(err.Error(), "no task store") {
		t.Errorf("restore of an empty backup: %v", err)
	}
}

// A backup whose reader went away (a cancelled request) stops with the
// context's error.
func TestBackupStopsWithContext(t *testing.T) {
	t.Parallel()
	s, err := Open(Options{Dir: filepath.Join(t.TempDir(), "s"), GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Create(context.Background(), testTask("alice", time.Now())); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Backup(ctx, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Backup after cancel = %v, want context.Canceled", err)
	}
}

// A file that is not a backup of a task store is refused with an error,
// never a crash, and leaves the directory as it was: the next restore, of
// the right file, can use it.
func TestRestoreRefusesNonBackups(t *testing.T) {
	t.Parallel()
	noise := make([]byte, 5000)
	for i := range noise { // a fixed pattern that Badger reads as an impossible length
		noise[i] = byte(i*7 + 0xd1)
	}
	tests := []struct {
		name   string
		input  []byte
		create bool // the directory exists, empty, before the restore
	}{
		{"empty file, new directory", nil, false},
		{"empty file, empty directory", nil, true},
		{"text", []byte("hi"), false},
		{"noise, new directory", noise, false},
		{"noise, empty directory", noise, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "restored")
			if tt.create {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := Restore(dir, bytes.NewReader(tt.input), nil); err == nil {
				t.Fatal("restored a file that is no backup")
			}
			entries, err := os.ReadDir(dir)
			switch {
			case !tt.create && !errors.Is(err, os.ErrNotExist):
				t.Errorf("the restore left %s behind (%d entries, %v), want it gone", dir, len(entries), err)
			case tt.create && (err != nil || len(entries) != 0):
				t.Errorf("the restore left %d entries in %s (%v), want it empty", len(entries), dir, err)
			}
		})
	}
}
