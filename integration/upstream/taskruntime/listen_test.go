package taskruntime

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// sseMessages splits an SSE body into its JSON messages.
func sseMessages(t *testing.T, body []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("SSE data %q: %v", d, err)
			}
			out = append(out, m)
		}
	}
	return out
}

// TestListen: subscriptions/listen with taskIds acknowledges this caller's
// tasks only, pushes notifications/tasks with the DetailedTask, and ends
// with the empty result once they are finished.
func TestListen(t *testing.T) {
	t.Parallel()
	_, url := testRuntime(t, Options{})
	c := newClient(t, url, true)
	c.auth = "Bearer dana"
	id := c.createTask(ToolSteps, map[string]any{"steps": 3, "stepMs": 5, "label": "pushed"})
	other := newClient(t, url, true)
	foreign := other.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})

	r := c.request("subscriptions/listen", map[string]any{"notifications": map[string]any{"taskIds": []string{id, foreign, "unknown"}}}, nil)
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("listen answer %d %q", r.status, r.header.Get("Content-Type"))
	}
	msgs := sseMessages(t, r.body)
	if len(msgs) < 3 {
		t.Fatalf("listen stream %s", r.body)
	}
	subID := json.RawMessage(r.ID)
	wantMeta := func(m map[string]any) bool {
		meta, _ := m["_meta"].(map[string]any)
		b, _ := json.Marshal(meta[metaSubscriptionID])
		return string(b) == string(subID)
	}
	ack := msgs[0]
	if ack["method"] != "notifications/subscriptions/acknowledged" || !wantMeta(ack["params"].(map[string]any)) {
		t.Fatalf("first message %v, want the acknowledgement", ack)
	}
	if got := ack["params"].(map[string]any)["notifications"].(map[string]any)["taskIds"]; len(got.([]any)) != 1 || got.([]any)[0] != id {
		t.Errorf("acknowledged taskIds %v, want only the caller's %s", got, id)
	}
	var statuses []string
	for _, m := range msgs[1 : len(msgs)-1] {
		p := m["params"].(map[string]any)
		if m["method"] != "notifications/tasks" || p["taskId"] != id || !wantMeta(p) || p["resultType"] != nil {
			t.Errorf("notification %v", m)
		}
		statuses = append(statuses, p["status"].(string))
	}
	last := msgs[len(msgs)-2]["params"].(map[string]any)
	if last["status"] != "completed" || text(last["result"]) != "Completed 3 steps for pushed" {
		t.Errorf("last notification %v, want the completed task with its result", last)
	}
	if slices.Contains(statuses[:len(statuses)-1], "completed") {
		t.Errorf("statuses %v: a notification after the terminal one", statuses)
	}
	end := msgs[len(msgs)-1]
	if res, _ := end["result"].(map[string]any); res == nil || res["resultType"] != "complete" || !wantMeta(res) {
		t.Errorf("stream end %v, want the empty result with the subscription id", end)
	}
}

// TestListenErrors: the filter's rules.
func TestListenErrors(t *testing.T) {
	t.Parallel()
	_, url := testRuntime(t, Options{})
	tests := []struct {
		name       string
		tasks      bool
		params     map[string]any
		wantStatus int
		wantCode   int
	}{
		{"taskIds without the extension", false, map[string]any{"notifications": map[string]any{"taskIds": []string{"x"}}}, 400, CodeMissingCapability},
		{"no notifications", true, map[string]any{}, 200, CodeInvalidParams},
		{"taskIds not a list", true, map[string]any{"notifications": map[string]any{"taskIds": "x"}}, 200, CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newClient(t, url, tt.tasks).request("subscriptions/listen", tt.params, nil)
			if r.status != tt.wantStatus || r.Error == nil || r.Error.Code != tt.wantCode {
				t.Errorf("answer %d %s, want %d with %d", r.status, r.body, tt.wantStatus, tt.wantCode)
			}
		})
	}
}

// TestControlHandler: the observer API over HTTP, as a test drives a
// runtime in another process.
//
//nolint:paralleltest,tparallel // the cases are steps, in order, on one task
func TestControlHandler(t *testing.T) {
	t.Parallel()
	s, url := testRuntime(t, Options{})
	ctl := httptest.NewServer(s.ControlHandler())
	t.Cleanup(ctl.Close)
	do := func(method, path string) (int, []byte) {
		req, _ := http.NewRequest(method, ctl.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	if code, _ := do(http.MethodPost, "/hold?tool=steps&step=1"); code != http.StatusNoContent {
		t.Fatalf("hold: %d", code)
	}
	c := newClient(t, url, true)
	id := c.createTask(ToolSteps, map[string]any{"steps": 1, "stepMs": 0})
	if _, err := s.WaitTask(waitCtx(t), id, func(v TaskView) bool { return v.Held }); err != nil {
		t.Fatalf("task %s never held: %v", id, err)
	}
	tests := []struct {
		name, method, path string
		wantCode           int
		wantBody           string
	}{
		{"list", http.MethodGet, "/tasks?tool=steps", 200, `"Held":true`},
		{"one", http.MethodGet, "/tasks/" + id, 200, `"StatusMessage":"step 1 of 1"`},
		{"unknown", http.MethodGet, "/tasks/nope", 404, "no such task"},
		{"counts", http.MethodGet, "/counts?tool=steps", 200, `"tasksCreated":1`},
		{"bad hold", http.MethodPost, "/hold?tool=steps&step=0", 400, "step"},
		{"release unknown", http.MethodPost, "/release?task=nope", 404, "no such task"},
		{"release", http.MethodPost, "/release?task=" + id, 204, ""},
		{"unhold", http.MethodPost, "/unhold?tool=steps", 204, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := do(tt.method, tt.path)
			if code != tt.wantCode || !strings.Contains(string(body), tt.wantBody) {
				t.Errorf("%s %s: %d %s, want %d with %q", tt.method, tt.path, code, body, tt.wantCode, tt.wantBody)
			}
		})
	}
	c.poll(id, StatusCompleted)
}
