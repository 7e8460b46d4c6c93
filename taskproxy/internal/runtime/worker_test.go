package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// plainIsError answers only where it agrees with the decoder applyOutcome
// used alone.
func TestPlainIsErrorAgreesWithDecoder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		result   string
		wantFast bool
	}{
		{`{"content":[{"type":"text","text":"ok"}]}`, true},
		{`{"content":[],"isError":true}`, true},
		{`{"isError":false}`, true},
		{`{"isError": true , "x":{"isError":false}}`, true},
		{`{"isError":true,"isError":null}`, true},
		{`{"isError":true,"isError":false}`, true},
		{`{"x":"isError","isError":true}`, true},
		{`not json`, true},
		{`{"isError":true`, true},
		{`{"isError":"true"}`, false},
		{`{"isError":1}`, false},
		{`{"IsError":true}`, false},
		{`{"is\u0045rror":true}`, false},
		{`[{"isError":true}]`, false},
		{`null`, false},
	}
	for _, tt := range tests {
		t.Run(tt.result, func(t *testing.T) {
			t.Parallel()
			got, ok := plainIsError([]byte(tt.result))
			if ok != tt.wantFast {
				t.Fatalf("fast path answered = %v, want %v", ok, tt.wantFast)
			}
			var r struct {
				IsError bool `json:"isError"`
			}
			_ = json.Unmarshal([]byte(tt.result), &r)
			if ok && got != r.IsError {
				t.Fatalf("isError = %v, decoder %v", got, r.IsError)
			}
		})
	}
}

// A task records at most maxTaskInputs input requests: an upstream asking
// for more fails it rather than growing its record without bound.
func TestInputRequestsCapped(t *testing.T) {
	t.Parallel()
	// On disk: the in-memory store keeps no value log, so it refuses
	// records as large as a thousand inputs make.
	rt, route := testRouteOn(t, newDiskStore(t))
	ctx := context.Background()
	tests := []struct {
		n       int
		wantErr bool
	}{{3, false}, {MaxTaskInputs, false}, {MaxTaskInputs + 1, true}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			t.Parallel()
			now := Now()
			tk := &task.Task{ID: task.NewTaskID(), Owner: "o", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Era: task.Era2026, Round: 1}
			if err := rt.Store.Create(ctx, tk); err != nil {
				t.Fatal(err)
			}
			reqs := make([]string, tt.n)
			for i := range reqs {
				reqs[i] = fmt.Sprintf(`"u%d":{"method":"elicitation/create","params":{}}`, i)
			}
			result := json.RawMessage(`{"resultType":"input_required","inputRequests":{` + strings.Join(reqs, ",") + `}}`)
			keys, err := (&worker{route: route, t: tk, run: &Run{Ctx: ctx}}).recordInput(result)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), fmt.Sprint("limit ", MaxTaskInputs)) {
					t.Fatalf("err = %v, want too many inputs", err)
				}
				return
			}
			if err != nil || len(keys) != tt.n {
				t.Fatalf("%d keys, %v; want %d", len(keys), err, tt.n)
			}
		})
	}
}

// A 2026-07-28 task's progress becomes its status message at most once a
// progress interval: a message throttled behind another is written when
// its time comes, while the call still runs (the follow loop waits on the
// throttle's timer, which the message itself armed).
func TestFollowWritesThrottledProgress(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		rt, route := testRoute(t)
		ctx := context.Background()
		now := Now()
		tk := &task.Task{ID: task.NewTaskID(), Owner: "o", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Minute,
			Era: task.Era2026, Params: json.RawMessage(`{"name":"x","_meta":{"progressToken":7}}`)}
		if err := rt.Store.Create(ctx, tk); err != nil {
			t.Fatal(err)
		}
		progress := func(n int, msg string) upstream.Event {
			p, _ := json.Marshal(map[string]any{"progressToken": 7, "progress": n, "total": 3, "message": msg})
			return upstream.Event{Notification: &jsonrpc.Message{JSONRPC: "2.0", Method: "notifications/progress", Params: p}}
		}
		events := make(chan upstream.Event, 3)
		events <- progress(1, "first")
		events <- progress(2, "second") // within the interval: throttled
		w := &worker{route: route, t: tk, run: &Run{Ctx: ctx}}
		done := make(chan *upstream.Event, 1)
		go func() { done <- w.follow(&upstream.Attempt{Events: events}) }()

		// The first message is written at once; the second when the
		// interval the first began has passed, with the call still running.
		synctest.Wait()
		if rec := getTask(t, rt, tk.ID); !strings.Contains(rec.StatusMessage, "first") {
			t.Fatalf("status message %q, want the first progress message at once", rec.StatusMessage)
		}
		time.Sleep(progressStatusInterval)
		synctest.Wait()
		if rec := getTask(t, rt, tk.ID); !strings.Contains(rec.StatusMessage, "second") {
			t.Fatalf("status message %q, want the throttled second message written while the call runs", rec.StatusMessage)
		}
		events <- upstream.Event{Final: &jsonrpc.Message{Result: json.RawMessage(`{}`)}}
		if ev := <-done; ev.Final == nil {
			t.Errorf("follow ended with %+v, want the final answer", ev)
		}
	})
}

// getTask reads task id of owner "o" from the runtime's store.
func getTask(t *testing.T, rt *Runtime, id string) *task.Task {
	t.Helper()
	rec, err := rt.Store.Get(context.Background(), "o", id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}
