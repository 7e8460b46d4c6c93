package integration

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// mountFS mounts a filesystem for the test (mount's arguments before the
// mount point) and unmounts it at the end; it skips the test when this
// machine does not let it mount.
func mountFS(t *testing.T, args ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("mounting a filesystem for the store needs root (uid %d)", os.Geteuid())
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", append(args, dir)...).CombinedOutput(); err != nil {
		t.Skipf("this machine does not let the test mount a filesystem (mount %s: %v %s)", strings.Join(args, " "), err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}
