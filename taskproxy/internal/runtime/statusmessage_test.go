package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func TestStatusPace(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_000_000, 0)
	tests := []struct {
		name   string
		offers []struct {
			message string
			after   time.Duration
		}
		want []bool
	}{
		{"first admitted, same one never again", []struct {
			message string
			after   time.Duration
		}{{"a", 0}, {"a", 2 * upstreamStatusInterval}}, []bool{true, false}},
		{"a change within the interval waits", []struct {
			message string
			after   time.Duration
		}{{"a", 0}, {"b", upstreamStatusInterval / 2}, {"b", upstreamStatusInterval}}, []bool{true, false, true}},
		{"changes an interval apart all go", []struct {
			message string
			after   time.Duration
		}{{"a", 0}, {"b", upstreamStatusInterval}, {"c", 2 * upstreamStatusInterval}}, []bool{true, true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var p statusPace
			for i, o := range tt.offers {
				if got := p.admit(o.message, start.Add(o.after)); got != tt.want[i] {
					t.Errorf("offer %d (%q at +%v) admitted %v, want %v", i, o.message, o.after, got, tt.want[i])
				}
			}
		})
	}
}

// updateCounter counts the store's successful updates.
type updateCounter struct {
	task.Store
	n atomic.Int64
}

func (s *updateCounter) Update(ctx context.Context, owner, id string, fn func(*task.Task) error) (*task.Task, error) {
	rec, err := s.Store.Update(ctx, owner, id, fn)
	if err == nil {
		s.n.Add(1)
	}
	return rec, err
}

// An upstream whose task reports a new large status message on every
// poll writes a bounded message, at most once per interval: it grew the
// store by the whole message on every poll before.
func TestUpstreamStatusMessageBoundedAndPaced(t *testing.T) {
	t.Parallel()
	store := &updateCounter{Store: newMemStore(t)}
	rt, route := testRouteOn(t, store)
	ctx := context.Background()
	now := Now()
	tk := &task.Task{ID: task.NewTaskID(), Owner: "o", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour,
		Era: task.Era2026, UpstreamTask: true, UpstreamV2026: true, UpstreamTaskID: "up-1"}
	if err := rt.Store.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	w := &worker{route: route, t: tk, run: &Run{Ctx: ctx}}
	const polls = 60
	big := strings.Repeat("é", 1<<15) // 64 KiB, two bytes a rune: the cut must keep runes whole
	began := time.Now()
	for i := range polls {
		w.mirrorUpstreamStatus(ctx, mustJSON(map[string]string{"taskId": "up-1", "statusMessage": fmt.Sprint(i) + big}))
	}
	took := time.Since(began)
	rec, err := rt.Store.Get(ctx, "o", tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.StatusMessage) > follow.MaxUpstreamStatusMessage+len("…") || !strings.HasSuffix(rec.StatusMessage, "éé…") {
		t.Errorf("status message of %d bytes (%.20q…), want one of the messages cut to %d bytes", len(rec.StatusMessage), rec.StatusMessage, follow.MaxUpstreamStatusMessage)
	}
	if !json.Valid(mustJSON(rec.StatusMessage)) || strings.ContainsRune(rec.StatusMessage, '\uFFFD') {
		t.Errorf("the cut broke a rune: %q", rec.StatusMessage[len(rec.StatusMessage)-8:])
	}
	// One write, and one more per interval the loop took (a loaded machine
	// may take longer than one).
	if maxWrites := 1 + int64(took/upstreamStatusInterval); store.n.Load() > maxWrites {
		t.Errorf("%d store writes for %d polls in %v, want at most %d", store.n.Load(), polls, took, maxWrites)
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
