package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Listing: an owner's tasks oldest first in pages, cursors only the store
// can issue, the active count, and the recovery listing across owners.

// listAll pages through owner's tasks with limit and returns the ids, the
// pages, and the cursors handed out.
func listAll(t *testing.T, s task.Store, owner string, limit int) (ids []string, pages int, cursors []string) {
	t.Helper()
	cursor := ""
	for {
		page, next, err := s.List(context.Background(), owner, cursor, limit)
		if err != nil {
			t.Fatalf("List(%s, page %d): %v", owner, pages+1, err)
		}
		pages++
		if len(page) > limit {
			t.Fatalf("List returned %d tasks with limit %d", len(page), limit)
		}
		for _, tk := range page {
			if tk.Owner != owner {
				t.Fatalf("List(%s) returned a task of %s", owner, tk.Owner)
			}
			ids = append(ids, tk.ID)
		}
		if next == "" {
			return ids, pages, cursors
		}
		if pages > 1000 {
			t.Fatal("List never ends")
		}
		cursors = append(cursors, next)
		cursor = next
	}
}

func testList(t *testing.T, s task.Store) {
	ctx := context.Background()
	// Created out of order; listed by creation time, terminal ones too.
	var want []string
	var tasks []*task.Task
	for i := range 7 {
		tasks = append(tasks, newTask("alice", t0.Add(time.Duration(i)*time.Millisecond)))
		want = append(want, tasks[i].ID)
	}
	for _, i := range []int{3, 0, 6, 1, 5, 2, 4} {
		mustCreate(t, s, tasks[i])
	}
	mustCreate(t, s, newTask("bob", t0))
	for _, limit := range []int{0, -1} {
		if _, _, err := s.List(ctx, "alice", "", limit); err == nil {
			t.Errorf("List with page size %d: no error", limit)
		}
	}
	if _, err := s.Update(ctx, "alice", want[0], setStatus(task.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		limit, pages int
	}{{1, 7}, {3, 3}, {7, 1}, {100, 1}}
	for _, tt := range tests {
		ids, pages, _ := listAll(t, s, "alice", tt.limit)
		if fmt.Sprint(ids) != fmt.Sprint(want) || pages != tt.pages {
			t.Errorf("limit %d: %v in %d pages, want %v in %d", tt.limit, ids, pages, want, tt.pages)
		}
	}
	// An exact multiple of the limit ends without an empty last page.
	if _, pages, _ := listAll(t, s, "bob", 1); pages != 1 {
		t.Errorf("bob's one task with limit 1 took %d pages", pages)
	}
	if page, next, err := s.List(ctx, "nobody", "", 10); err != nil || len(page) != 0 || next != "" {
		t.Errorf("List of an owner without tasks = %d, %q, %v", len(page), next, err)
	}
	// Tasks with one creation time are all listed, once.
	same := t0.Add(time.Hour)
	for range 5 {
		mustCreate(t, s, newTask("carol", same))
	}
	ids, _, _ := listAll(t, s, "carol", 2)
	if len(ids) != 5 || len(uniq(ids)) != 5 {
		t.Errorf("5 tasks created at one instant listed as %v", ids)
	}
}

func uniq(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// A cursor the store did not issue to this owner is refused with
// ErrInvalidCursor, never used to seek.
func testListCursors(t *testing.T, s task.Store) {
	ctx := context.Background()
	for i := range 4 {
		mustCreate(t, s, newTask("alice", t0.Add(time.Duration(i)*time.Millisecond)), newTask("bob", t0.Add(time.Duration(i)*time.Millisecond)))
	}
	_, _, aliceCursors := listAll(t, s, "alice", 1)
	_, _, bobCursors := listAll(t, s, "bob", 1)
	if len(aliceCursors) != 3 || len(bobCursors) != 3 {
		t.Fatalf("cursors: alice %d, bob %d; want 3 each", len(aliceCursors), len(bobCursors))
	}
	c := aliceCursors[0]
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	forged := []struct{ name, cursor string }{
		{"garbage", "!!"},
		{"base64 of nothing useful", "AAAA"},
		{"a bare position", "MDAwMDAwMDAwMDAwMDAwMC8"},
		{"first character changed", flip(c, 0)},
		{"middle character changed", flip(c, len(c)/2)},
		{"truncated", c[:len(c)-2]},
		{"extended", c + "AA"},
		{"doubled", c + c},
		{"whitespace", " " + c},
		{"issued to bob", bobCursors[0]},
		{"bob's last", bobCursors[2]},
	}
	for _, f := range forged {
		if f.cursor == c {
			continue
		}
		if _, _, err := s.List(ctx, "alice", f.cursor, 10); !errors.Is(err, task.ErrInvalidCursor) {
			t.Errorf("List(alice, %s cursor %q): err = %v, want ErrInvalidCursor", f.name, f.cursor, err)
		}
	}
	// alice's own cursors still work, and a cursor can be used again.
	for range 2 {
		page, _, err := s.List(ctx, "alice", aliceCursors[1], 10)
		if err != nil || len(page) != 2 {
			t.Errorf("alice's own cursor: %d tasks, %v; want 2", len(page), err)
		}
	}
}

// A cursor names a position, not a task: it still works after the task it
// stopped at was swept, and tasks created later are listed after it.
func testListCursorSurvivesSweep(t *testing.T, s task.Store) {
	ctx := context.Background()
	doomed := newTask("alice", t0)
	doomed.TTL = time.Minute
	first := newTask("alice", t0.Add(-time.Millisecond))
	mustCreate(t, s, first, doomed, newTask("alice", t0.Add(time.Millisecond)))
	page, next, err := s.List(ctx, "alice", "", 2)
	if err != nil || len(page) != 2 || page[1].ID != doomed.ID || next == "" {
		t.Fatalf("first page: %d tasks, %q, %v", len(page), next, err)
	}
	if n, err := s.Sweep(ctx, t0.Add(2*time.Minute), 10); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	later := newTask("alice", t0.Add(time.Second))
	mustCreate(t, s, later)
	page, next, err = s.List(ctx, "alice", next, 10)
	if err != nil || len(page) != 2 || page[1].ID != later.ID || next != "" {
		t.Errorf("after the sweep: %d tasks, %q, %v; want the two after the cursor", len(page), next, err)
	}
}

func testCountActive(t *testing.T, s task.Store) {
	ctx := context.Background()
	var ids []string
	for range 6 {
		tk := newTask("alice", t0)
		mustCreate(t, s, tk)
		ids = append(ids, tk.ID)
	}
	ended := newTask("alice", t0)
	ended.Status = task.StatusFailed
	mustCreate(t, s, ended, newTask("bob", t0))
	if _, err := s.Update(ctx, "alice", ids[0], setStatus(task.StatusCancelled)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "alice", ids[1], setStatus(task.StatusInputRequired)); err != nil {
		t.Fatal(err)
	}
	for owner, want := range map[string]int{"alice": 5, "bob": 1, "nobody": 0} {
		if n, err := s.CountActive(ctx, owner); err != nil || n != want {
			t.Errorf("CountActive(%s) = %d, %v; want %d", owner, n, err, want)
		}
	}
}

// ListActive pages through the non-terminal tasks of every owner, each once.
func testListActive(t *testing.T, s task.Store) {
	ctx := context.Background()
	want := map[string]bool{}
	for i := range 11 {
		tk := newTask([]string{"a", "b", "c"}[i%3], t0.Add(time.Duration(i)*time.Second))
		switch i {
		case 3:
			tk.Status = task.StatusCompleted
		case 4:
			tk.Status = task.StatusInputRequired
			want[tk.ID] = true
		default:
			want[tk.ID] = true
		}
		mustCreate(t, s, tk)
		if i == 7 {
			if _, err := s.Update(ctx, tk.Owner, tk.ID, setStatus(task.StatusFailed)); err != nil {
				t.Fatal(err)
			}
			delete(want, tk.ID)
		}
	}
	for _, limit := range []int{1, 2, 9, 100} {
		got := map[string]bool{}
		cursor, pages := "", 0
		for {
			page, next, err := s.ListActive(ctx, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			if pages++; pages > 100 || len(page) > limit {
				t.Fatalf("limit %d: page %d has %d tasks", limit, pages, len(page))
			}
			for _, tk := range page {
				if got[tk.ID] {
					t.Fatalf("limit %d: %s listed twice", limit, tk.ID)
				}
				if tk.Status.Terminal() {
					t.Errorf("limit %d: terminal task %s listed", limit, tk.ID)
				}
				got[tk.ID] = true
			}
			if next == "" {
				break
			}
			cursor = next
		}
		if len(got) != len(want) {
			t.Errorf("limit %d: listed %d active tasks, want %d", limit, len(got), len(want))
		}
		for id := range want {
			if !got[id] {
				t.Errorf("limit %d: %s not listed", limit, id)
			}
		}
	}
}
