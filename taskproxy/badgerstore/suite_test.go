package badgerstore_test

import (
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/storetest"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The embedded Badger store passes the suite, in memory and on disk.

func TestSuiteInMemory(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) task.Store {
		t.Helper()
		s, err := badgerstore.Open(badgerstore.Options{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestSuiteOnDisk(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) task.Store {
		t.Helper()
		s, err := badgerstore.Open(badgerstore.Options{Dir: t.TempDir(), SyncWrites: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func BenchmarkBadgerOnDisk(b *testing.B) {
	s, err := badgerstore.Open(badgerstore.Options{Dir: b.TempDir(), SyncWrites: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.Bench(b, s)
}

func BenchmarkBadgerLookups(b *testing.B) {
	s, err := badgerstore.Open(badgerstore.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchLookups(b, s)
}
