package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// relayedStore is relayed, also returning the store.
func relayedStore(t *testing.T, schema string) (*pgstore.Store, *runtime.Hub, func(task.TaskEvent)) {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: schema, MaxConns: 4, EventPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	hub := runtime.NewHub()
	r, err := s.RelayEvents(hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		_ = s.Close()
	})
	return s, hub, r.Send
}

// outsider returns a connection of a new role that may connect to the
// database but has no rights on any of the gateway's schemas.
func outsider(t *testing.T) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	role := fmt.Sprintf("spy_%d_%d", os.Getpid(), schemas.Add(1))
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	conn, err := pgx.Connect(ctx, dsnAs(t, role))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// notifications collects what conn receives until it has n or the deadline
// passed.
func notifications(t *testing.T, conn *pgx.Conn, n int) []string {
	t.Helper()
	var out []string
	deadline := time.Now().Add(20 * time.Second)
	for len(out) < n && time.Now().Before(deadline) {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		m, err := conn.WaitForNotification(ctx)
		cancel()
		if err != nil {
			break
		}
		out = append(out, m.Payload)
	}
	return out
}

func drain(sub *runtime.Subscription) {
	for {
		select {
		case <-sub.Changed:
		case <-sub.Progress:
		default:
			return
		}
	}
}

// A role that may connect to the database but has no rights on the schema
// learns nothing from the events, even knowing the channel: no task id, no
// progress text; and it cannot read the key they are sealed with. What it
// injects, forged or replayed, reaches no subscriber. A store of another
// schema cannot read the events either.
func TestRelaySealed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := newSchema(t)
	sa, _, a := relayedStore(t, schema)
	sb, b, _ := relayedStore(t, schema)
	id := task.NewTaskID()
	sub := b.Subscribe(id)
	defer sub.Close()

	spy := outsider(t)
	var listens int
	if err := spy.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %' AND pid <> pg_backend_pid()").Scan(&listens); err != nil {
		t.Fatal(err)
	}
	if listens != 0 {
		t.Errorf("the outsider sees %d LISTEN statements of other roles: it can learn the channel", listens)
	}
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'").Scan(&listens); err != nil || listens < 2 {
		t.Fatalf("a superuser sees %d LISTEN statements (%v), want the two stores'", listens, err)
	}
	channel := eventChannel(t, sa, schema) // the worst case: it learned it anyway
	if _, err := spy.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	var key []byte
	if err := spy.QueryRow(ctx, "SELECT value FROM "+pgx.Identifier{schema}.Sanitize()+".meta LIMIT 1").Scan(&key); err == nil {
		t.Fatal("the outsider read the schema's meta table")
	}

	secret := "progress-text-" + task.NewTaskID()
	params := `{"progressToken":"pt1","progress":1,"message":"` + secret + `"}`
	a(task.TaskEvent{TaskID: id, Kind: task.EventChanged})
	a(task.TaskEvent{TaskID: id, Kind: task.EventProgress, Params: []byte(params)})
	select {
	case p := <-sub.Progress:
		if string(p) != params {
			t.Fatalf("progress params %s", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("progress did not arrive")
	}
	seen := notifications(t, spy, 2)
	if len(seen) != 2 {
		t.Fatalf("the outsider got %d notifications, want both (sealed)", len(seen))
	}
	for _, p := range seen {
		if strings.Contains(p, id) || strings.Contains(p, secret) {
			t.Errorf("an outsider read a notification in clear: %q", p)
		}
	}

	// Injected: the old clear format, junk, and a replay of what was
	// captured; then a genuine event, which arrives after them.
	drain(sub)
	injected := []string{
		"evil|p|" + id + `|{"progressToken":"pt1","progress":99,"message":"INJECTED"}`,
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
		seen[1],
	}
	for _, p := range injected {
		if _, err := spy.Exec(ctx, "SELECT pg_notify($1, $2)", channel, p); err != nil {
			t.Fatal(err)
		}
	}
	a(task.TaskEvent{TaskID: id, Kind: task.EventChanged})
	awaitChanged(t, sub, "a genuine event after the injected ones")
	select {
	case p := <-sub.Progress:
		t.Errorf("an injected notification reached a subscriber: %s", p)
	default:
	}
	if n := sb.DroppedEvents(); n < uint64(len(injected)) {
		t.Errorf("%d notifications counted as dropped, want %d", n, len(injected))
	}

	// Another schema's store: the first schema's progress, put on its
	// channel, does not open.
	other := newSchema(t)
	sc, c, _ := relayedStore(t, other)
	_, _, d := relayedStore(t, other)
	elsewhere := c.Subscribe(id)
	defer elsewhere.Close()
	if _, err := admin.Exec(ctx, "SELECT pg_notify($1, $2)", eventChannel(t, sc, other), seen[1]); err != nil {
		t.Fatal(err)
	}
	d(task.TaskEvent{TaskID: id, Kind: task.EventChanged})
	awaitChanged(t, elsewhere, "a genuine event of the other schema")
	select {
	case p := <-elsewhere.Progress:
		t.Errorf("another schema's store read an event of the first: %s", p)
	default:
	}
}

// eventChannel is the channel of the store's events (the worst case: an
// outsider who learned it).
func eventChannel(t *testing.T, s *pgstore.Store, schema string) string {
	t.Helper()
	c := pgstore.EventChannel(s)
	if strings.Contains(c, schema) {
		t.Fatalf("the event channel %q is named after the schema: outsiders can guess it", c)
	}
	return c
}

// Sealing shrinks the progress params that fit a notification: about 5,800
// bytes cross, larger ones stay local (the worker's process still delivers
// them) and do not hold up the events after them.
func TestRelaySealedProgressLimit(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	_, _, a := relayedStore(t, schema)
	_, b, _ := relayedStore(t, schema)
	id := task.NewTaskID()
	sub := b.Subscribe(id)
	defer sub.Close()
	fits := `{"message":"` + strings.Repeat("x", 5800) + `"}`
	a(task.TaskEvent{TaskID: id, Kind: task.EventProgress, Params: []byte(fits)})
	select {
	case p := <-sub.Progress:
		if string(p) != fits {
			t.Fatalf("progress params of %d bytes, want %d", len(p), len(fits))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("progress of 5,800 bytes did not arrive")
	}
	tooBig := `{"message":"` + strings.Repeat("x", 6000) + `"}`
	a(task.TaskEvent{TaskID: id, Kind: task.EventProgress, Params: []byte(tooBig)})
	a(task.TaskEvent{TaskID: id, Kind: task.EventChanged})
	awaitChanged(t, sub, "changed after a progress too large to seal")
	select {
	case p := <-sub.Progress:
		t.Errorf("a progress notification of %d bytes crossed", len(p))
	default:
	}
}
