package replicatest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A 2025-11-25 task runs on replica A; tasks/cancel lands on replica B. The
// upstream learns of the cancellation (notifications/cancelled from A, with
// the task's upstream id and session) and the task ends cancelled.
func TestCancelOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.replica(t, replicaOptions{}), f.replica(t, replicaOptions{})
	session := legacySession(t, a.url)
	id := legacyTask(t, a.url, session, upstream.ToolSlowCompute, map[string]any{"seconds": 60})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.up.WaitCalls(ctx, upstream.ToolSlowCompute, 1); err != nil {
		t.Fatal(err)
	}
	m, _ := post(ctx, t, b.url, session, "tasks/cancel", map[string]any{"taskId": id})
	if res := ok(t, m, "tasks/cancel on B"); str(res["status"]) != "cancelled" {
		t.Fatalf("tasks/cancel on B answered %v", res)
	}
	if err := f.up.WaitCancellations(ctx, upstream.ToolSlowCompute, 1); err != nil {
		t.Fatalf("the upstream call on replica A was not cancelled: %v", err)
	}
	if got := a.stored(t, id).Status; got != task.StatusCancelled {
		t.Errorf("task ended %s, want cancelled", got)
	}
	waitFor(t, "A's worker to stop", func() bool { return a.rt.RunningWorkers() == 0 })
}

// A 2026-07-28 task on replica A waits for input; the answer (tasks/update)
// lands on replica B, and A's worker makes the retry: the task completes.
func TestInputAnsweredOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.replica(t, replicaOptions{}), f.replica(t, replicaOptions{})
	id := modernTask(t, a.url, upstream.ToolConfirmDelete, map[string]any{"filename": "a.txt"})
	answerOn(t, b, id)
	var tk map[string]json.RawMessage
	waitFor(t, "the task to end", func() bool {
		tk = ok(t, v2026Request(context.Background(), t, b.url, "tasks/get", map[string]any{"taskId": id}), "tasks/get")
		s := str(tk["status"])
		return s != "working" && s != "input_required"
	})
	if str(tk["status"]) != "completed" || !strings.Contains(string(tk["result"]), "Deleted a.txt") {
		t.Fatalf("task ended %v", tk)
	}
}

// answerOn answers every input request of task id through replica r.
func answerOn(t *testing.T, r *replica, id string) {
	t.Helper()
	var tk map[string]json.RawMessage
	waitFor(t, "the task to ask for input", func() bool {
		tk = ok(t, v2026Request(context.Background(), t, r.url, "tasks/get", map[string]any{"taskId": id}), "tasks/get")
		return str(tk["status"]) == "input_required"
	})
	var inputs map[string]json.RawMessage
	_ = json.Unmarshal(tk["inputRequests"], &inputs)
	answers := map[string]any{}
	for k := range inputs {
		answers[k] = map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}
	}
	if len(answers) == 0 {
		t.Fatalf("no input requests in %v", tk)
	}
	ok(t, v2026Request(context.Background(), t, r.url, "tasks/update", map[string]any{"taskId": id, "inputResponses": answers}), "tasks/update")
}

// resultOnB starts a 2025-11-25 task on A and waits for it with tasks/result
// on B, which must answer once A's worker records the outcome.
func resultOnB(t *testing.T, a, b *replica) {
	t.Helper()
	session := legacySession(t, a.url)
	id := legacyTask(t, a.url, session, upstream.ToolSlowCompute, map[string]any{"seconds": 1, "label": "x"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, _ := post(ctx, t, b.url, session, "tasks/result", map[string]any{"taskId": id})
	res := ok(t, m, "tasks/result on B")
	if !strings.Contains(string(res["content"]), "Computed x") {
		t.Fatalf("tasks/result on B answered %s", m.Result)
	}
}

// A tasks/result waiter on replica B returns when A's worker finishes.
func TestResultWaiterOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resultOnB(t, f.replica(t, replicaOptions{}), f.replica(t, replicaOptions{}))
}

// With notifications lost (NOTIFY off on both replicas), the waiter on B
// still wakes: the tasks it waits for are polled.
func TestLostNotificationPolled(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := replicaOptions{noNotify: true, eventPoll: 200 * time.Millisecond}
	resultOnB(t, f.replica(t, o), f.replica(t, o))
}

// A subscriptions/listen stream on replica B sees the task of replica A
// complete.
func TestSubscriptionOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.replica(t, replicaOptions{}), f.replica(t, replicaOptions{})
	id := modernTask(t, a.url, upstream.ToolSlowCompute, map[string]any{"seconds": 1})
	params := map[string]any{"notifications": map[string]any{"taskIds": []string{id}},
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}}
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"listen-1"`), "subscriptions/listen", params)
	// The stream re-reads its tasks at every keep-alive (15 s): the change
	// must arrive before the first one to have crossed as an event.
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var statuses []string
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var n struct {
			Method string `json:"method"`
			Params struct {
				TaskID string `json:"taskId"`
				Status string `json:"status"`
			} `json:"params"`
		}
		if json.Unmarshal([]byte(data), &n) != nil || n.Method != "notifications/tasks" {
			continue
		}
		statuses = append(statuses, n.Params.Status)
		if n.Params.TaskID == id && n.Params.Status == "completed" {
			return
		}
	}
	t.Fatalf("the stream on B ended (%v) without the task completing; statuses seen: %v", sc.Err(), statuses)
}

// Replica A dies mid-call. Once its leases expire, replica B takes its tasks
// over: the retry_on_restart tool runs again, once, and completes; the
// other fails with the reason; a 2026-07-28 task waiting for input waits on
// B, which makes the retry once it is answered.
func TestTakeoverAfterReplicaDies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := replicaOptions{retry: []string{upstream.ToolSlowEcho}}
	a, b := f.replica(t, o), f.replica(t, o)
	session := legacySession(t, a.url)
	rerun := legacyTask(t, a.url, session, upstream.ToolSlowEcho, map[string]any{"seconds": 2, "label": "again"})
	lost := legacyTask(t, a.url, session, upstream.ToolSlowCompute, map[string]any{"seconds": 60})
	waiting := modernTask(t, a.url, upstream.ToolConfirmDelete, map[string]any{"filename": "b.txt"})
	waitFor(t, "the 2026-07-28 task to ask for input", func() bool { return a.stored(t, waiting).Status == task.StatusInputRequired })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tool := range []string{upstream.ToolSlowEcho, upstream.ToolSlowCompute} {
		if err := f.up.WaitCalls(ctx, tool, 1); err != nil {
			t.Fatal(err)
		}
	}
	holder := a.store.Holder()
	a.stop()
	// A died: its leases run out (made to at once, instead of in 30 s).
	if _, err := admin.Exec(ctx, "UPDATE "+pgx.Identifier{f.schema}.Sanitize()+".leases SET expires_ns = 0 WHERE holder = $1", holder); err != nil {
		t.Fatal(err)
	}
	var failed, done *task.Task
	waitFor(t, "B to take both tasks over and end them", func() bool {
		// Requests to B also give a re-run the request it starts from.
		post(context.Background(), t, b.url, session, "tasks/get", map[string]any{"taskId": rerun})
		failed, done = b.stored(t, lost), b.stored(t, rerun)
		return failed.Status.Terminal() && done.Status.Terminal()
	})
	if failed.Status != task.StatusFailed || !strings.Contains(failed.StatusMessage, "replica running the call stopped") {
		t.Errorf("the task of a tool not retried ended %s: %q", failed.Status, failed.StatusMessage)
	}
	if done.Status != task.StatusCompleted || !strings.Contains(string(done.Result), "Computed again") {
		t.Errorf("the retried task ended %s (%q): %s", done.Status, done.StatusMessage, done.Result)
	}
	if n := f.up.Calls(upstream.ToolSlowEcho); n != 2 {
		t.Errorf("the retry_on_restart tool ran %d times, want 2 (once on A, once on B)", n)
	}
	if n := f.up.Calls(upstream.ToolSlowCompute); n != 1 {
		t.Errorf("the tool not retried ran %d times, want 1", n)
	}
	if holder := b.stored(t, waiting).Lease.Holder; holder != b.store.Holder() {
		t.Fatalf("the task waiting for input is held by %q, not by B", holder)
	}
	answerOn(t, b, waiting)
	var tk *task.Task
	waitFor(t, "the answered task to end", func() bool {
		tk = b.stored(t, waiting)
		return tk.Status.Terminal()
	})
	if tk.Status != task.StatusCompleted || !strings.Contains(string(tk.Result), "Deleted b.txt") {
		t.Errorf("the task answered after the takeover ended %s: %s", tk.Status, tk.Result)
	}
}

// sweepCounter counts the sweeps of a store.
type sweepCounter struct {
	*pgstore.Store
	sweeps atomic.Int64
}

func (s *sweepCounter) Sweep(ctx context.Context, now time.Time, batch int) (int, error) {
	s.sweeps.Add(1)
	return s.Store.Sweep(ctx, now, batch)
}

// Of two replicas sweeping every 50 ms, exactly one sweeps: the leader.
func TestOneReplicaSweeps(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	counters := []*sweepCounter{{}, {}}
	for _, c := range counters {
		f.replica(t, replicaOptions{sweepInterval: 50 * time.Millisecond, wrap: func(s *pgstore.Store) task.Store {
			c.Store = s
			return c
		}})
	}
	sweeps := func() int64 { return counters[0].sweeps.Load() + counters[1].sweeps.Load() }
	waitFor(t, "a sweep", func() bool { return sweeps() >= 5 })
	// Ten sweeps more, one a tick: the other replica, ticking as often,
	// had as many ticks meanwhile to sweep on, however slow the machine.
	seen := sweeps()
	waitFor(t, "ten sweeps more", func() bool { return sweeps() >= seen+10 })
	a, b := counters[0].sweeps.Load(), counters[1].sweeps.Load()
	if a > 0 && b > 0 {
		t.Errorf("both replicas swept (%d and %d times)", a, b)
	}
}

// A 2025-11-25 task on replica A asks for input; the tasks/result stream on
// replica B relays the upstream's elicitation, B forwards the answer to the
// upstream on the task's session, and B's stream answers once A's worker
// records the outcome.
func TestLegacyInputOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.replica(t, replicaOptions{}), f.replica(t, replicaOptions{})
	session := legacySession(t, a.url)
	id := legacyTask(t, a.url, session, upstream.ToolConfirmDelete, map[string]any{"filename": "notes.txt"})
	waitFor(t, "the task to ask for input", func() bool { return b.stored(t, id).Status == task.StatusInputRequired })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body, _ := jsonrpc.RequestBytes(json.RawMessage(`"r1"`), "tasks/result", map[string]string{"taskId": id})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range session {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	answered := 0
	for sc.Scan() {
		data, found := strings.CutPrefix(sc.Text(), "data: ")
		if !found {
			continue
		}
		m, err := jsonrpc.Parse([]byte(data))
		switch {
		case err != nil:
			continue
		case m.IsRequest() && m.Method == "elicitation/create":
			answer, _ := jsonrpc.ResponseBytes(m.ID, map[string]any{"action": "accept", "content": map[string]any{"confirm": true}})
			post, _ := http.NewRequestWithContext(ctx, http.MethodPost, b.url, bytes.NewReader(answer))
			post.Header.Set("Content-Type", "application/json")
			post.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range session {
				post.Header.Set(k, v)
			}
			r, err := http.DefaultClient.Do(post)
			if err != nil {
				t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != http.StatusAccepted {
				t.Fatalf("answering the elicitation on B: HTTP %d", r.StatusCode)
			}
			answered++
		case m.IsResponse():
			if answered != 1 || m.Error != nil || !strings.Contains(string(m.Result), "Deleted notes.txt") {
				t.Fatalf("after %d answers, tasks/result on B = %s / %+v", answered, m.Result, m.Error)
			}
			return
		}
	}
	t.Fatalf("the tasks/result stream on B ended without the result: %v", sc.Err())
}

// A task taken over waits on its new replica until that replica's route
// serves a request (the re-run is made from it); meanwhile its lease is
// renewed, so that no third replica takes it over too.
func TestTakenOverTaskKeepsItsLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := replicaOptions{retry: []string{upstream.ToolSlowEcho}}
	a, b := f.replica(t, o), f.replica(t, o)
	session := legacySession(t, a.url)
	id := legacyTask(t, a.url, session, upstream.ToolSlowEcho, map[string]any{"seconds": 1, "label": "later"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.up.WaitCalls(ctx, upstream.ToolSlowEcho, 1); err != nil {
		t.Fatal(err)
	}
	leases := pgx.Identifier{f.schema}.Sanitize() + ".leases"
	holder := a.store.Holder()
	a.stop()
	if _, err := admin.Exec(ctx, "UPDATE "+leases+" SET expires_ns = 0 WHERE holder = $1", holder); err != nil {
		t.Fatal(err)
	}
	// No request reaches B: the re-run waits, and its lease is about to
	// run out.
	waitFor(t, "B to take the task over", func() bool { return b.stored(t, id).Lease.Holder == b.store.Holder() })
	soon := time.Now().Add(2 * time.Second)
	if _, err := admin.Exec(ctx, "UPDATE "+leases+" SET expires_ns = $1 WHERE task_id = $2", soon.UnixNano(), id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B to renew the lease of the waiting task", func() bool {
		l := b.stored(t, id).Lease
		return l.Holder == b.store.Holder() && l.Expires.After(soon)
	})
	post(ctx, t, b.url, session, "tasks/get", map[string]any{"taskId": id}) // the route serves: the re-run starts
	var tk *task.Task
	waitFor(t, "the re-run to end", func() bool {
		tk = b.stored(t, id)
		return tk.Status.Terminal()
	})
	if tk.Status != task.StatusCompleted || f.up.Calls(upstream.ToolSlowEcho) != 2 {
		t.Errorf("the re-run ended %s after %d calls", tk.Status, f.up.Calls(upstream.ToolSlowEcho))
	}
}

// A 2026-07-28 task on replica A cancelled on replica B: A closes the
// upstream stream, which on that wire is the cancellation.
func TestModernCancelOnAnotherReplica(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a, b := f.replica(t, replicaOptions{}), f.replica(t, replicaOptions{})
	id := modernTask(t, a.url, upstream.ToolSlowCompute, map[string]any{"seconds": 60})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.up.WaitCalls(ctx, upstream.ToolSlowCompute, 1); err != nil {
		t.Fatal(err)
	}
	ok(t, v2026Request(ctx, t, b.url, "tasks/cancel", map[string]any{"taskId": id}), "tasks/cancel on B")
	if got := b.stored(t, id).Status; got != task.StatusCancelled {
		t.Fatalf("task %s after tasks/cancel on B, want cancelled", got)
	}
	if err := f.up.WaitCancellations(ctx, upstream.ToolSlowCompute, 1); err != nil {
		t.Fatalf("the upstream call on replica A was not cancelled: %v", err)
	}
	waitFor(t, "A's worker to stop", func() bool { return a.rt.RunningWorkers() == 0 })
}

// heldLong reports whether r holds the lease of task id for the hour
// longLeases grants (renewed at least once), not the 30 s of creation.
func heldLong(t *testing.T, r *replica, id string) bool {
	t.Helper()
	l := r.stored(t, id).Lease
	return l.Holder == r.store.Holder() && l.Expires.After(time.Now().Add(10*time.Minute))
}

// Replica A stops cleanly (Runtime.Close) in the middle of a call and with
// a 2026-07-28 task waiting for input: it releases their leases, so that
// replica B takes the tasks over at its next pass. A's leases last an hour
// here, far beyond the test's deadline: only the release lets B in.
func TestTakeoverAfterCleanStop(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.replica(t, replicaOptions{wrap: longLeases})
	b := f.replica(t, replicaOptions{})
	session := legacySession(t, a.url)
	lost := legacyTask(t, a.url, session, upstream.ToolSlowCompute, map[string]any{"seconds": 60})
	waiting := modernTask(t, a.url, upstream.ToolConfirmDelete, map[string]any{"filename": "c.txt"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.up.WaitCalls(ctx, upstream.ToolSlowCompute, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A to renew its leases for an hour", func() bool { return heldLong(t, a, lost) && heldLong(t, a, waiting) })
	a.stop()
	var failed *task.Task
	waitFor(t, "B to take both tasks over", func() bool {
		post(context.Background(), t, b.url, session, "tasks/get", map[string]any{"taskId": lost})
		failed = b.stored(t, lost)
		return failed.Status.Terminal() && b.stored(t, waiting).Lease.Holder == b.store.Holder()
	})
	if failed.Status != task.StatusFailed || !strings.Contains(failed.StatusMessage, "replica running the call stopped") {
		t.Errorf("the task of a tool not retried ended %s: %q", failed.Status, failed.StatusMessage)
	}
	answerOn(t, b, waiting)
	var tk *task.Task
	waitFor(t, "the answered task to end", func() bool {
		tk = b.stored(t, waiting)
		return tk.Status.Terminal()
	})
	if tk.Status != task.StatusCompleted || !strings.Contains(string(tk.Result), "Deleted c.txt") {
		t.Errorf("the task answered after the takeover ended %s: %s", tk.Status, tk.Result)
	}
}

// stoppedMidCall starts a retry_on_restart task on a replica that stops
// mid-call with its leases run out, and returns the task's id and session.
func stoppedMidCall(t *testing.T, f *fixture) (string, map[string]string) {
	t.Helper()
	a := f.replica(t, replicaOptions{retry: []string{upstream.ToolSlowEcho}})
	session := legacySession(t, a.url)
	id := legacyTask(t, a.url, session, upstream.ToolSlowEcho, map[string]any{"seconds": 1, "label": "elsewhere"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.up.WaitCalls(ctx, upstream.ToolSlowEcho, 1); err != nil {
		t.Fatal(err)
	}
	holder := a.store.Holder()
	a.stop()
	if _, err := admin.Exec(ctx, "UPDATE "+pgx.Identifier{f.schema}.Sanitize()+".leases SET expires_ns = 0 WHERE holder = $1", holder); err != nil {
		t.Fatal(err)
	}
	return id, session
}

// A task recovered by a replica whose route serves no request is not held
// there for ever: after its ResumeWait, B releases the lease, and replica
// C, whose route serves, takes the task over and re-runs it. B's leases
// last an hour here: only the release lets C in.
func TestIdleReplicaReleasesResumingTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	retry := []string{upstream.ToolSlowEcho}
	id, session := stoppedMidCall(t, f)
	b := f.replica(t, replicaOptions{retry: retry, wrap: longLeases, resumeWait: time.Millisecond})
	waitFor(t, "B to take the task over", func() bool { return heldLong(t, b, id) })
	c := f.replica(t, replicaOptions{retry: retry})
	var tk *task.Task
	waitFor(t, "C to take the task over and re-run it", func() bool {
		post(context.Background(), t, c.url, session, "tasks/get", map[string]any{"taskId": id})
		tk = c.stored(t, id)
		return tk.Status.Terminal()
	})
	if tk.Status != task.StatusCompleted || f.up.Calls(upstream.ToolSlowEcho) != 2 {
		t.Errorf("the re-run ended %s after %d calls", tk.Status, f.up.Calls(upstream.ToolSlowEcho))
	}
}

// The replica that released the lease of a task it waits to resume still
// runs it when its route serves first: it takes the lease again.
func TestIdleReplicaResumesReleasedTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id, session := stoppedMidCall(t, f)
	b := f.replica(t, replicaOptions{retry: []string{upstream.ToolSlowEcho}, wrap: longLeases, resumeWait: time.Millisecond})
	waitFor(t, "B to take the task over", func() bool { return heldLong(t, b, id) })
	waitFor(t, "B to release the lease", func() bool {
		l := b.stored(t, id).Lease
		return l.Holder == b.store.Holder() && !l.Expires.After(time.Now())
	})
	var tk *task.Task
	waitFor(t, "B to re-run the task", func() bool {
		post(context.Background(), t, b.url, session, "tasks/get", map[string]any{"taskId": id})
		tk = b.stored(t, id)
		return tk.Status.Terminal()
	})
	if tk.Status != task.StatusCompleted || f.up.Calls(upstream.ToolSlowEcho) != 2 {
		t.Errorf("the re-run ended %s after %d calls", tk.Status, f.up.Calls(upstream.ToolSlowEcho))
	}
}
