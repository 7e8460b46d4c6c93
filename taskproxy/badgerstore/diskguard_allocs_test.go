package badgerstore

import "testing"

// The disk guard checks the filesystem before every commit without
// allocating: the free space is asked of the probe's open descriptor.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestDiskGuardCheckAllocs(t *testing.T) {
	g, err := newDiskGuard(t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.close)
	if n := testing.AllocsPerRun(20, func() {
		if err := g.check(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%.0f allocations per check, want none", n)
	}
}
