package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func bigEndedTask(owner string, size int) *task.Task {
	now := time.Now().UTC()
	return &task.Task{
		ID: task.NewTaskID(), Owner: owner, Status: task.StatusCompleted,
		CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Era: task.Era2026, Tool: "echo",
		Params: json.RawMessage(`{"name":"echo"}`),
		Result: json.RawMessage(`{"text":"` + strings.Repeat("r", size) + `"}`),
	}
}

// The owner check and the listings read a task's summary, never its
// record: with the record unreadable, another owner's lookup is still
// refused as "not found" (the row is not fetched), and the listings still
// answer; a row written before summaries (none) is listed from its record.
func TestSummarySparesTheRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	s := open(t, schema)
	broken, old := bigEndedTask("alice", 256<<10), bigEndedTask("alice", 64<<10)
	old.CreatedAt = old.CreatedAt.Add(time.Millisecond)
	for _, tk := range []*task.Task{broken, old} {
		if err := s.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	tasks := pgx.Identifier{schema, "tasks"}.Sanitize()
	if _, err := admin.Exec(ctx, "UPDATE "+tasks+" SET record = 'not a record' WHERE id = $1", broken.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "UPDATE "+tasks+" SET summary = NULL WHERE id = $1", old.ID); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		call func() error
	}{
		{"another owner's Get", func() error {
			if _, err := s.Get(ctx, "bob", broken.ID); !errors.Is(err, task.ErrForeign) {
				return errors.New("want ErrForeign, got " + errString(err))
			}
			return nil
		}},
		{"another owner's Update", func() error {
			_, err := s.Update(ctx, "bob", broken.ID, func(*task.Task) error { return nil })
			if !errors.Is(err, task.ErrForeign) {
				return errors.New("want ErrForeign, got " + errString(err))
			}
			return nil
		}},
		{"List", func() error {
			page, _, err := s.List(ctx, "alice", "", 10)
			if err != nil || len(page) != 2 || page[0].ID != broken.ID || page[1].ID != old.ID || len(page[1].Result) != 0 {
				return errors.New("want both summaries, got error " + errString(err))
			}
			return nil
		}},
		{"ListAll", func() error {
			page, _, err := s.ListAll(ctx, task.TaskFilter{Tool: "echo"}, "", 10)
			if err != nil || len(page) != 2 || len(page[0].Result) != 0 {
				return errors.New("want both summaries, got error " + errString(err))
			}
			return nil
		}},
		{"the owner's Get reads the record", func() error {
			if _, err := s.Get(ctx, "alice", broken.ID); err == nil || errors.Is(err, task.ErrNotFound) {
				return errors.New("want the record's decoding error, got " + errString(err))
			}
			return nil
		}},
		{"the owner's Get of a row without summary", func() error {
			if got, err := s.Get(ctx, "alice", old.ID); err != nil || len(got.Result) != len(old.Result) {
				return errors.New("want the task whole, got " + errString(err))
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if err := c.call(); err != nil {
				t.Error(err)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
