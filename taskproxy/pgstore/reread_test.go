package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

var apps atomic.Int64

// withApp returns the test DSN with an application name of its own, by
// which the test finds the store's connections on the server.
func withApp(t *testing.T) (string, string) {
	t.Helper()
	app := fmt.Sprintf("reread_%d_%d", os.Getpid(), apps.Add(1))
	if strings.Contains(dsn, "://") {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		return dsn + sep + "application_name=" + app, app
	}
	return dsn + " application_name=" + app, app
}

// terminate ends every server backend of the application app, as an
// administrator's pg_terminate_backend does, and waits until they are gone.
func terminate(t *testing.T, app string) {
	t.Helper()
	ctx := context.Background()
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("the store has no connection to terminate")
	}
	waitUntil(t, "the backends of "+app+" to go after pg_terminate_backend", 10*time.Millisecond, func() bool {
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

// A read right after pg_terminate_backend of the store's connections
// answers, rather than failing on the dead connection the pool hands out
// (the pool pings only connections idle for a second or more).
//
//nolint:paralleltest,tparallel // the cases terminate the connections of one store
func TestReadsOutliveTerminatedConnections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, app := withApp(t)
	s, err := pgstore.Open(ctx, pgstore.Options{DSN: d, Schema: newSchema(t), MaxConns: 4, NoNotify: true, EventPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	working, finished := tk("alice"), tk("alice")
	finished.Status = task.StatusCompleted
	for _, x := range []*task.Task{working, finished} {
		if err := s.Create(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	reads := []struct {
		name string
		read func() error
	}{
		{"Get", func() error {
			got, err := s.Get(ctx, "alice", working.ID)
			if err == nil && got.ID != working.ID {
				err = fmt.Errorf("got task %s", got.ID)
			}
			return err
		}},
		{"GetSummary", func() error {
			got, err := s.GetSummary(ctx, "alice", working.ID)
			if err == nil && got.ID != working.ID {
				err = fmt.Errorf("got task %s", got.ID)
			}
			return err
		}},
		{"Get of a task that does not exist", func() error {
			if _, err := s.Get(ctx, "alice", task.NewTaskID()); !errors.Is(err, task.ErrNotFound) {
				return fmt.Errorf("want ErrNotFound, got %w", err)
			}
			return nil
		}},
		{"List", func() error {
			got, _, err := s.List(ctx, "alice", "", 10)
			if err == nil && len(got) != 2 {
				err = fmt.Errorf("listed %d tasks, want 2", len(got))
			}
			return err
		}},
		{"CountActive", func() error {
			n, err := s.CountActive(ctx, "alice")
			if err == nil && n != 1 {
				err = fmt.Errorf("%d active, want 1", n)
			}
			return err
		}},
		{"GetAny", func() error {
			got, err := s.GetAny(ctx, finished.ID)
			if err == nil && got.Status != task.StatusCompleted {
				err = fmt.Errorf("status %s", got.Status)
			}
			return err
		}},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			for round := range 3 {
				if err := r.read(); err != nil {
					t.Fatalf("round %d, before the connections were terminated: %v", round, err)
				}
				terminate(t, app)
				if err := r.read(); err != nil {
					t.Fatalf("round %d, the read after pg_terminate_backend: %v", round, err)
				}
			}
		})
	}
}
