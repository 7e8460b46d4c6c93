package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Operator access (task.AdminLister), which the admin API needs of
// every backend: all owners' tasks newest first, filters, cursors that only
// the admin listing accepts, and lookups by id alone with "expired" for
// swept tasks.

func adminLister(t *testing.T, s task.Store) task.AdminLister {
	t.Helper()
	al, ok := s.(task.AdminLister)
	if !ok {
		t.Fatalf("%T does not implement task.AdminLister", s)
	}
	return al
}

// adminListAll pages through ListAll with limit and returns the ids.
func adminListAll(t *testing.T, al task.AdminLister, filter task.TaskFilter, limit int) (ids []string, pages int) {
	t.Helper()
	cursor := ""
	for {
		page, next, err := al.ListAll(context.Background(), filter, cursor, limit)
		if err != nil {
			t.Fatalf("ListAll(%+v, page %d): %v", filter, pages+1, err)
		}
		pages++
		if len(page) > limit {
			t.Fatalf("ListAll returned %d tasks with limit %d", len(page), limit)
		}
		for _, tk := range page {
			ids = append(ids, tk.ID)
		}
		if next == "" {
			return ids, pages
		}
		if pages > 1000 {
			t.Fatal("ListAll never ends")
		}
		cursor = next
	}
}

func testAdminListAll(t *testing.T, s task.Store) {
	ctx := context.Background()
	al := adminLister(t, s)
	// Six tasks of three owners, created out of order; the newest first.
	specs := []struct{ owner, principal, tenant, route, tool string }{
		{"alice", "alice", "t1", "srv0#0", "echo"}, {"bob", "bob", "t2", "srv0#0", "slow"}, {"alice", "alice", "t1", "srv1#0", "slow"},
		{"carol", "carol", "t2", "srv0#0", "echo"}, {"bob", "bob", "t2", "srv1#0", "echo"}, {"alice", "alice", "t1", "srv0#0", "echo"},
	}
	tasks := make([]*task.Task, len(specs))
	for i, sp := range specs {
		tasks[i] = newTask(sp.owner, t0.Add(time.Duration(i)*time.Millisecond))
		tasks[i].Principal, tasks[i].Tenant, tasks[i].Route, tasks[i].Tool = sp.principal, sp.tenant, sp.route, sp.tool
	}
	at := func(i int) time.Time { return tasks[i].CreatedAt }
	for _, i := range []int{4, 1, 5, 0, 3, 2} {
		mustCreate(t, s, tasks[i])
	}
	if _, err := s.Update(ctx, "bob", tasks[4].ID, setStatus(task.StatusCompleted)); err != nil {
		t.Fatal(err)
	}
	newest := func(idx ...int) string {
		var ids []string
		for _, i := range idx {
			ids = append(ids, tasks[i].ID)
		}
		return fmt.Sprint(ids)
	}
	tests := []struct {
		name   string
		filter task.TaskFilter
		limit  int
		want   string
		pages  int
	}{
		{"all, one per page", task.TaskFilter{}, 1, newest(5, 4, 3, 2, 1, 0), 6},
		{"all, pages of 4", task.TaskFilter{}, 4, newest(5, 4, 3, 2, 1, 0), 2},
		{"all, one page", task.TaskFilter{}, 100, newest(5, 4, 3, 2, 1, 0), 1},
		{"status", task.TaskFilter{Status: task.StatusCompleted}, 10, newest(4), 1},
		{"working", task.TaskFilter{Status: task.StatusWorking}, 2, newest(5, 3, 2, 1, 0), 3},
		{"principal", task.TaskFilter{Principal: "alice"}, 2, newest(5, 2, 0), 2},
		{"tool", task.TaskFilter{Tool: "slow"}, 10, newest(2, 1), 1},
		{"principal and tool", task.TaskFilter{Principal: "alice", Tool: "echo"}, 1, newest(5, 0), -1},
		{"no match", task.TaskFilter{Principal: "dave"}, 10, "[]", 1},
		{"tenant", task.TaskFilter{Tenant: "t2"}, 2, newest(4, 3, 1), 2},
		{"route", task.TaskFilter{Route: "srv1#0"}, 10, newest(4, 2), 1},
		{"tenant and route", task.TaskFilter{Tenant: "t1", Route: "srv0#0"}, 1, newest(5, 0), -1},
		{"created after", task.TaskFilter{CreatedAfter: at(2)}, 2, newest(5, 4, 3), 2},
		{"created before", task.TaskFilter{CreatedBefore: at(2)}, 10, newest(1, 0), 1},
		{"created between", task.TaskFilter{CreatedAfter: at(1), CreatedBefore: at(4)}, 10, newest(3, 2), 1},
	}
	for _, tt := range tests {
		ids, pages := adminListAll(t, al, tt.filter, tt.limit)
		if fmt.Sprint(ids) != tt.want || (tt.pages > 0 && pages != tt.pages) {
			t.Errorf("%s: %v in %d pages, want %s in %d", tt.name, ids, pages, tt.want, tt.pages)
		}
	}

	// Cursors: a forged one is refused, and the admin listing's and an
	// owner's are not interchangeable.
	_, adminNext, err := al.ListAll(ctx, task.TaskFilter{}, "", 1)
	if err != nil || adminNext == "" {
		t.Fatalf("ListAll first page: next %q, %v", adminNext, err)
	}
	_, ownerNext, err := s.List(ctx, "alice", "", 1)
	if err != nil || ownerNext == "" {
		t.Fatalf("List first page: next %q, %v", ownerNext, err)
	}
	for _, c := range []string{"garbage", ownerNext, adminNext + "x"} {
		if _, _, err := al.ListAll(ctx, task.TaskFilter{}, c, 10); !errors.Is(err, task.ErrInvalidCursor) {
			t.Errorf("ListAll with cursor %q: %v, want ErrInvalidCursor", c, err)
		}
	}
	if _, _, err := s.List(ctx, "alice", adminNext, 10); !errors.Is(err, task.ErrInvalidCursor) {
		t.Errorf("an owner's List with the admin cursor: %v, want ErrInvalidCursor", err)
	}
}

func testAdminGetAny(t *testing.T, s task.Store) {
	ctx := context.Background()
	al := adminLister(t, s)
	now := t0.Add(24 * time.Hour)
	live := newTask("alice", now)
	gone := newTask("bob", now.Add(-2*time.Hour)) // ttl 1h: expired at now
	mustCreate(t, s, live, gone)
	got, err := al.GetAny(ctx, live.ID)
	if err != nil || got.ID != live.ID || got.Owner != "alice" {
		t.Fatalf("GetAny of a live task: %+v, %v", got, err)
	}
	if _, err := al.GetAny(ctx, task.NewTaskID()); !isPlainNotFound(err) {
		t.Errorf("GetAny of an unknown id: %v, want plain ErrNotFound", err)
	}
	if n, err := s.Sweep(ctx, now, 10); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if _, err := al.GetAny(ctx, gone.ID); !errors.Is(err, task.ErrExpired) {
		t.Errorf("GetAny of a swept task: %v, want ErrExpired", err)
	}
}

// A filter that few tasks match still finds them all, in order, however
// many others lie between them (a backend may read in batches).
func testAdminListAllSparse(t *testing.T, s task.Store) {
	al := adminLister(t, s)
	var want []string
	for i := range 1203 {
		owner := "bob"
		if i%600 == 0 { // 0, 600, 1200
			owner = "alice"
		}
		tk := newTask(owner, t0.Add(time.Duration(i)*time.Millisecond))
		tk.Principal = owner
		mustCreate(t, s, tk)
		if owner == "alice" {
			want = append([]string{tk.ID}, want...)
		}
	}
	for _, limit := range []int{1, 2, 5} {
		ids, _ := adminListAll(t, al, task.TaskFilter{Principal: "alice"}, limit)
		if fmt.Sprint(ids) != fmt.Sprint(want) {
			t.Errorf("limit %d: %v, want %v", limit, ids, want)
		}
	}
}
