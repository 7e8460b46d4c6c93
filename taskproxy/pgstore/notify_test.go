package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// relayed opens a store on schema without polling, and a hub relayed
// through it; publish sends an event to the other stores' hubs, as the
// runtime's hub does for what it publishes.
func relayed(t *testing.T, schema string) (hub *runtime.Hub, publish func(task.TaskEvent)) {
	t.Helper()
	s, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: schema, MaxConns: 4, EventPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	hub = runtime.NewHub()
	r, err := s.RelayEvents(hub)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.Close()
		_ = s.Close()
	})
	return hub, r.Send
}

func awaitChanged(t *testing.T, sub *runtime.Subscription, what string) {
	t.Helper()
	select {
	case <-sub.Changed:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: no event", what)
	}
}

// Events published on one store's hub reach the subscribers of another
// store's hub on the schema, and only of that schema; progress travels with
// its params unless they are too large for a notification.
func TestRelayBetweenStores(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	_, a := relayed(t, schema)
	b, _ := relayed(t, schema)
	other, _ := relayed(t, newSchema(t))
	sub := b.Subscribe("task-1")
	defer sub.Close()
	elsewhere := other.Subscribe("task-1")
	defer elsewhere.Close()

	a(task.TaskEvent{TaskID: "task-1", Kind: task.EventChanged})
	awaitChanged(t, sub, "changed")

	a(task.TaskEvent{TaskID: "task-1", Kind: task.EventProgress, Params: []byte(`{"progress":1}`)})
	select {
	case p := <-sub.Progress:
		if string(p) != `{"progress":1}` {
			t.Errorf("progress params %s", p)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("progress did not arrive")
	}

	big := `{"message":"` + strings.Repeat("x", 9000) + `"}`
	a(task.TaskEvent{TaskID: "task-1", Kind: task.EventProgress, Params: []byte(big)})
	a(task.TaskEvent{TaskID: "task-1", Kind: task.EventChanged})
	awaitChanged(t, sub, "changed after an oversized progress")
	select {
	case p := <-sub.Progress:
		t.Errorf("an oversized progress notification crossed: %d bytes", len(p))
	default:
	}
	select {
	case <-elsewhere.Changed:
		t.Error("an event crossed to another schema")
	case <-elsewhere.Progress:
		t.Error("progress crossed to another schema")
	default:
	}
}

// When the listening connection breaks, the relay reconnects: events flow
// again, and the watched tasks are woken since some may have been missed.
func TestRelayReconnects(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	sa, _, a := relayedStore(t, schema)
	b, _ := relayed(t, schema)
	sub := b.Subscribe("task-1")
	defer sub.Close()
	ctx := context.Background()
	listen := `LISTEN "` + eventChannel(t, sa, schema) + `"`
	listeners := func() int {
		var n int
		if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE query = $1", listen).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := listeners(); n != 2 {
		t.Fatalf("%d listening connections, want one per store", n)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query = $1", listen); err != nil {
		t.Fatal(err)
	}
	awaitChanged(t, sub, "wake-up after the reconnect")
	waitUntil(t, "the relays to listen again", 20*time.Millisecond, func() bool { return listeners() == 2 })
	a(task.TaskEvent{TaskID: "task-1", Kind: task.EventChanged})
	awaitChanged(t, sub, "an event after the reconnect")
}

// A lease released by a process that stops is announced to the other
// replicas' takeover passes (Hub.Released), not to the task's subscribers;
// an announcement queued just before the relay closes still goes out.
func TestRelayReleasedBeforeClose(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s, err := pgstore.Open(context.Background(), pgstore.Options{DSN: dsn, Schema: schema, MaxConns: 4, EventPoll: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.RelayEvents(runtime.NewHub())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := relayed(t, schema)
	sub := b.Subscribe("task-1")
	defer sub.Close()

	r.Send(task.TaskEvent{TaskID: "task-1", Kind: task.EventReleased})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Released():
	case <-time.After(20 * time.Second):
		t.Fatal("the release queued before Close did not reach the other replica")
	}
	select {
	case <-sub.Changed:
		t.Error("a release woke the task's subscribers")
	default:
	}
}
