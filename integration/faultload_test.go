package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// Steady load for the fault-injection tests: workers that create tasks of
// both protocol versions (2025-11-25 task-augmented calls, 2026-07-28 calls
// that become tasks) one after another while a fault comes and goes, and
// the count that matters afterwards: tasks accepted, tasks ended with a
// reason, tasks lost.

// promptBound is how long any one request of a fault test may take before
// it counts as a hang. It bounds the answer's head and first message, not a
// task's work; it is generous for a loaded two-core machine and far below
// what a request stuck behind an outage would take.
const promptBound = 10 * time.Second

// faultLoad is the load of one fault and what it saw.
type faultLoad struct {
	t     *testing.T
	url   string
	token func(subject string) string // "" for no Authorization header
	tool  string
	secs  float64

	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	accepted map[string]string // task id -> owner's subject
	acceptAt []time.Time       // when each accepted request was sent
	refused  map[string]int    // a refusal's kind and message -> count
	hangs    []string
	broken   []string // answers that were neither a task nor a refusal
}

// startFaultLoad starts workers per protocol version creating tasks of
// tool (seconds secs each) through url until stop.
func startFaultLoad(t *testing.T, url string, token func(string) string, tool string, secs float64, workers int) *faultLoad { //nolint:unparam // each fault test names the tool its load calls, beside the outcomes it expects of it
	t.Helper()
	l := &faultLoad{t: t, url: url, token: token, tool: tool, secs: secs, stop: make(chan struct{}),
		accepted: map[string]string{}, refused: map[string]int{}}
	for i := range workers {
		subject := fmt.Sprintf("load-%d", i)
		v2025 := i%2 == 0
		var session string
		if v2025 {
			session = l.initialize(subject)
		}
		l.wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				l.create(subject, session, n)
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	return l
}

// initialize opens a 2025-11-25 session for subject, before any fault.
func (l *faultLoad) initialize(subject string) string {
	l.t.Helper()
	rc := newRPCClient(l.t, l.url)
	if tok := l.token(subject); tok != "" {
		rc.header.Set("Authorization", "Bearer "+tok)
	}
	rc.initialize("")
	return rc.session
}

// halt stops the workers and waits for their last requests.
func (l *faultLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

// create sends one task-creating call and records how it was answered.
func (l *faultLoad) create(subject, session string, n int) {
	args := map[string]any{"seconds": l.secs, "label": fmt.Sprintf("%s-%d", subject, n)}
	var body string
	headers := map[string]string{}
	if session != "" {
		b, _ := jsonrpc.RequestBytes(json.RawMessage(`1`), "tools/call", map[string]any{"name": l.tool, "arguments": args, "task": map[string]any{"ttl": 600000}})
		body = string(b)
		headers["Mcp-Session-Id"], headers["Mcp-Protocol-Version"] = session, "2025-11-25"
	} else {
		body = v2026Body(1, "tools/call", map[string]any{"name": l.tool, "arguments": args})
		headers = v2026Headers("tools/call", l.tool)
	}
	sent := time.Now()
	status, header, m, err := l.post(body, subject, headers)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		l.hangs = append(l.hangs, fmt.Sprintf("%s at %s: no answer within %s", subject, sent.Format("15:04:05.000"), promptBound))
	case err != nil:
		l.broken = append(l.broken, fmt.Sprintf("%s: %v", subject, err))
	case status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests:
		if header.Get("Retry-After") == "" {
			l.broken = append(l.broken, fmt.Sprintf("%s: HTTP %d without Retry-After", subject, status))
		}
		msg := ""
		if m != nil && m.Error != nil {
			msg = m.Error.Message
		}
		l.refused[fmt.Sprintf("HTTP %d %s", status, refRE(msg))]++
	case m == nil:
		l.broken = append(l.broken, fmt.Sprintf("%s: HTTP %d without a JSON-RPC answer", subject, status))
	case m.Error != nil:
		l.refused[fmt.Sprintf("HTTP %d JSON-RPC %d %s", status, m.Error.Code, refRE(m.Error.Message))]++
	default:
		var res struct {
			Task *struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
			ResultType string `json:"resultType"`
			TaskID     string `json:"taskId"`
		}
		_ = json.Unmarshal(m.Result, &res)
		id := res.TaskID
		if res.Task != nil {
			id = res.Task.TaskID
		}
		if id == "" {
			l.broken = append(l.broken, fmt.Sprintf("%s: HTTP %d answered %s, want a task", subject, status, m.Result))
			return
		}
		l.accepted[id] = subject
		l.acceptAt = append(l.acceptAt, sent)
	}
}

// refRE drops an error reference ("(ref 0a1b…)") so that refusals group.
func refRE(msg string) string {
	if i := strings.Index(msg, "(ref "); i >= 0 {
		if j := strings.IndexByte(msg[i:], ')'); j >= 0 {
			return msg[:i] + "(ref …)" + msg[i+j+1:]
		}
	}
	return msg
}

// post sends body as subject and reads the answer's first JSON-RPC
// response, JSON or event stream, within promptBound.
func (l *faultLoad) post(body, subject string, headers map[string]string) (int, http.Header, *jsonrpc.Message, error) {
	ctx, cancel := context.WithTimeout(context.Background(), promptBound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, l.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if tok := l.token(subject); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("POST: %w", err)
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return resp.StatusCode, resp.Header, nil, fmt.Errorf("reading the answer: %w", err)
		}
		m, err := jsonrpc.Parse(data)
		if err != nil {
			return resp.StatusCode, resp.Header, nil, fmt.Errorf("answer %q: %w", data, err)
		}
		return resp.StatusCode, resp.Header, m, nil
	case "text/event-stream":
		events := sse.NewReader(resp.Body)
		for {
			ev, err := events.Next()
			if err != nil {
				return resp.StatusCode, resp.Header, nil, fmt.Errorf("event stream ended without a response: %w", err)
			}
			if !ev.HasData || strings.TrimSpace(ev.Data) == "" {
				continue
			}
			if m, err := jsonrpc.Parse([]byte(ev.Data)); err == nil && m.IsResponse() {
				return resp.StatusCode, resp.Header, m, nil
			}
		}
	}
	return resp.StatusCode, resp.Header, nil, nil
}

// acceptedSince reports whether a task was accepted for a request sent at
// or after t.
func (l *faultLoad) acceptedSince(t time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.acceptAt {
		if !at.Before(t) {
			return true
		}
	}
	return false
}

// count is the number of tasks accepted so far.
func (l *faultLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.accepted)
}

// faultCounts are the figures each fault test prints.
type faultCounts struct {
	accepted, ended, lost int
	outcomes              map[string]int // status and message -> count
}

// settle waits (up to timeout in all) for every accepted task to end, read
// through url by its owner, and counts the outcomes. A task that is not
// found, or still not ended, is lost.
func (l *faultLoad) settle(url string, timeout time.Duration) faultCounts {
	l.t.Helper()
	l.mu.Lock()
	accepted := make(map[string]string, len(l.accepted))
	maps.Copy(accepted, l.accepted)
	l.mu.Unlock()
	fc := faultCounts{accepted: len(accepted), outcomes: map[string]int{}}
	clients := map[string]*v2026Client{}
	deadline := time.Now().Add(timeout)
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		owner := accepted[id]
		if clients[owner] == nil {
			clients[owner] = newV2026Client(l.t, url, true)
			if tok := l.token(owner); tok != "" {
				clients[owner].header.Set("Authorization", "Bearer "+tok)
			}
		}
		status, message := waitTaskEnded(clients[owner], id, deadline)
		switch status {
		case "completed", "failed", "cancelled":
			fc.ended++
			fc.outcomes[status+" "+refRE(message)]++
		default:
			fc.lost++
			l.t.Errorf("accepted task %s of %s: %s %q after the fault", id, owner, status, message)
		}
	}
	return fc
}

// report logs the counts and the answers the load got, and fails the test
// for a hang, a broken answer or a lost task.
func (l *faultLoad) report(fault string, fc faultCounts, recovery time.Duration) {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Logf("%s: tasks accepted %d, ended with a reason %d, lost %d; recovered %s after the fault ended",
		fault, fc.accepted, fc.ended, fc.lost, recovery.Round(10*time.Millisecond))
	l.t.Logf("%s: outcomes %v; refusals %v", fault, fc.outcomes, l.refused)
	for _, h := range l.hangs {
		l.t.Errorf("%s: a request hung: %s", fault, h)
	}
	for _, b := range l.broken {
		l.t.Errorf("%s: %s", fault, b)
	}
	if fc.lost != 0 {
		l.t.Errorf("%s: %d acknowledged tasks lost, want 0", fault, fc.lost)
	}
}
