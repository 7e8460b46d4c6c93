package badgerstore_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
)

// CheckDir finds what would make Open fail for good (a file in the path, a
// read-only filesystem) without creating the directory or leaving a file;
// a directory it can write in passes.
//
//nolint:paralleltest,tparallel // the test checks, after its cases, what they left in the directory
func TestCheckDir(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		dir  string
		fix  string // part of what Permanent says to do; "" for no error
	}{
		{"an existing directory", base, ""},
		{"a directory to create", filepath.Join(base, "a", "b"), ""},
		{"a file", file, "not at a file"},
		{"under a file", filepath.Join(file, "store"), "not at a file"},
	}
	if _, err := os.Stat("/proc/self"); err == nil {
		cases = append(cases, struct{ name, dir, fix string }{"on /proc", "/proc/mcp-tasks-nonexistent/store", "virtual"})
	}
	if ro := readOnlyDir(t); ro != "" {
		cases = append(cases, struct{ name, dir, fix string }{"on a read-only filesystem", filepath.Join(ro, "store"), "writable filesystem"})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := badgerstore.CheckDir(c.dir)
			fix, permanent := badgerstore.Permanent(err)
			switch {
			case c.fix == "" && err != nil:
				t.Fatalf("CheckDir(%s): %v", c.dir, err)
			case c.fix != "" && (!permanent || !strings.Contains(fix, c.fix)):
				t.Fatalf("CheckDir(%s) = %v; Permanent = %q, %v; want %q", c.dir, err, fix, permanent, c.fix)
			}
		})
	}
	entries, err := os.ReadDir(base)
	if err != nil || len(entries) != 1 {
		t.Errorf("CheckDir left %v in %s (%v), want only the file", entries, base, err)
	}
	if _, permanent := badgerstore.Permanent(syscall.ENOSPC); permanent {
		t.Error("a full disk is permanent")
	}
}

// readOnlyDir mounts a read-only tmpfs for the test, or returns "" where
// this machine does not let it.
func readOnlyDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return ""
	}
	dir := t.TempDir()
	if err := exec.Command("mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", dir).Run(); err != nil {
		return ""
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}
