package wire

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// researchList is a tools/list result with one tool the upstream runs only
// as a task and one it runs plainly.
const researchList = `{"tools":[{"name":"research","execution":{"taskSupport":"required"}},{"name":"echo"}]}`

// listingUpstream answers every request with researchList and counts them.
func listingUpstream(fetches *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+researchList+`}`)
	})
}

// A route that saw no initialize (a new configuration, a restarted
// process, another replica) decides on what the route that saw one kept in
// the store: an upstream that declared task calls has its required tool
// required and run as its own task; one that declared none is not asked
// for its tools and runs no task itself, whatever its tools declare; with
// no record (a store of an earlier version), the tools' declarations are
// taken at their word.
func TestLearnedCapsAcrossRoutes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// initialize is the answer the first route saw; "" for none.
		initialize string
		// wantPlain is how many tools/list fetches a plain call of the
		// tool makes; wantFetches how many after a task-augmented call
		// too.
		wantPlain, wantFetches int32
		wantMode               task.Support
		wantRuns               bool
	}{
		{"declared task calls", `{"protocolVersion":"2025-11-25","capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}}}`, 1, 1, task.SupportRequired, true},
		{"declared no task calls", `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}}}`, 0, 0, task.SupportOptional, false},
		{"no record", "", 0, 1, task.SupportRequired, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			store, err := badgerstore.Open(badgerstore.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			storeOf := func() task.LearnedStore { return store }

			if tt.initialize != "" {
				first := NewToolPolicy(nil, task.SupportOptional, false)
				first.Caps.KeepIn(storeOf, "srv0#0", nil)
				if _, err := first.RewriteInitialize([]byte(tt.initialize)); err != nil {
					t.Fatal(err)
				}
			}
			// A route of another name learns nothing from that record.
			other := NewToolPolicy(nil, task.SupportOptional, false)
			other.Caps.KeepIn(storeOf, "srv1#0", nil)
			other.Caps.Recall(context.Background())
			if other.Caps.tasksCall != nil {
				t.Errorf("route srv1#0 recalled %v from the record of srv0#0", *other.Caps.tasksCall)
			}

			next := NewToolPolicy(nil, task.SupportOptional, false)
			next.Caps.KeepIn(storeOf, "srv0#0", nil)
			var fetches atomic.Int32
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
			next.LearnToolsFor(context.Background(), r, listingUpstream(&fetches), "research", false)
			if got := fetches.Load(); got != tt.wantPlain {
				t.Errorf("a plain call fetched tools/list %d times, want %d", got, tt.wantPlain)
			}
			next.LearnToolsFor(context.Background(), r, listingUpstream(&fetches), "research", true)
			if got := fetches.Load(); got != tt.wantFetches {
				t.Errorf("tools/list fetched %d times, want %d", got, tt.wantFetches)
			}
			// A listing passing through, as a client's tools/list.
			out, err := next.RewriteToolsList([]byte(researchList))
			if err != nil {
				t.Fatal(err)
			}
			if want := `"name":"research","execution":{"taskSupport":"` + string(tt.wantMode) + `"}`; !strings.Contains(string(out), want) {
				t.Errorf("tools/list rewritten to %s, want %s", out, want)
			}
			if got := next.EffectiveMode("research"); got != tt.wantMode {
				t.Errorf("EffectiveMode = %s, want %s", got, tt.wantMode)
			}
			if got := next.UpstreamRunsTask("research"); got != tt.wantRuns {
				t.Errorf("UpstreamRunsTask = %v, want %v", got, tt.wantRuns)
			}
			if next.UpstreamRunsTask("echo") {
				t.Error("UpstreamRunsTask(echo), a tool declaring no task mode")
			}
		})
	}
}

// A route saves what an initialize answer declared once, and again when it
// changes; what it saved is what the next route recalls.
func TestLearnedCapsSavedOnChange(t *testing.T) {
	t.Parallel()
	store, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	counting := &countingLearned{LearnedStore: store}
	p := NewToolPolicy(nil, task.SupportOptional, false)
	p.Caps.KeepIn(func() task.LearnedStore { return counting }, "srv0#0", nil)
	withTasks := []byte(`{"capabilities":{"tasks":{"requests":{"tools":{"call":{}}}}}}`)
	without := []byte(`{"capabilities":{}}`)
	for _, answer := range [][]byte{withTasks, withTasks, withTasks, without, without, withTasks} {
		p.Caps.LearnInitialize(answer)
	}
	if got := counting.saves.Load(); got != 3 {
		t.Errorf("%d saves for three changes of what was declared, want 3", got)
	}
	recalled := NewToolPolicy(nil, task.SupportOptional, false)
	recalled.Caps.KeepIn(func() task.LearnedStore { return store }, "srv0#0", nil)
	recalled.Caps.Recall(context.Background())
	if c := recalled.Caps.tasksCall; c == nil || !*c {
		t.Errorf("recalled %v, want the last answer's task calls", c)
	}
}

// countingLearned counts the saves reaching a store.
type countingLearned struct {
	task.LearnedStore
	saves atomic.Int32
}

func (c *countingLearned) SaveLearned(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	c.saves.Add(1)
	return c.LearnedStore.SaveLearned(ctx, key, value, ttl)
}
