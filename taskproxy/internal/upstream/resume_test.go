package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
)

// resumingUpstream is a next handler that answers each request the
// gateway makes (the call's POST, then each GET that resumes its stream)
// with the next of answers, and records the Last-Event-ID each came with.
type resumingUpstream struct {
	answers []func(w http.ResponseWriter, r *http.Request) error

	mu       sync.Mutex
	requests []string    // "POST", "GET after <Last-Event-ID>"
	times    []time.Time // when each came (on a synctest bubble's clock)
}

func (u *resumingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = u.ServeHTTPErr(w, r)
}

func (u *resumingUpstream) ServeHTTPErr(w http.ResponseWriter, r *http.Request) error {
	u.mu.Lock()
	n := len(u.requests)
	seen := r.Method
	if r.Method == http.MethodGet {
		seen += " after " + r.Header.Get("Last-Event-ID")
	}
	u.requests = append(u.requests, seen)
	u.times = append(u.times, time.Now())
	u.mu.Unlock()
	if n >= len(u.answers) {
		http.Error(w, "no more answers", http.StatusTeapot)
		return nil
	}
	return u.answers[n](w, r)
}

func (u *resumingUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.requests...)
}

// waits returns how long the gateway waited before each request after
// the first.
func (u *resumingUpstream) waits() []time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	var waits []time.Duration
	for i := 1; i < len(u.times); i++ {
		waits = append(waits, u.times[i].Sub(u.times[i-1]))
	}
	return waits
}

// streamThen is an answer that streams events, then ends with end (nil:
// cleanly).
func streamThen(end func(*http.Request) error, events ...string) func(http.ResponseWriter, *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, ev := range events {
			_, _ = w.Write([]byte(ev))
		}
		if end == nil {
			return nil
		}
		return end(r)
	}
}

// Ways an upstream's stream breaks, as the next handler reports them.
var (
	// reverse_proxy aborts the answer when reading the upstream's body
	// fails mid-stream.
	aborted = func(*http.Request) error { panic(http.ErrAbortHandler) }
	// A handler that returns the network's error.
	reset = func(*http.Request) error { return fmt.Errorf("reading: %w", syscall.ECONNRESET) }
	// reverse_proxy's error when it cannot connect (a proxy in between
	// restarts): nothing written.
	refused = func(http.ResponseWriter, *http.Request) error {
		return fmt.Errorf("dialing: %w", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})
	}
)

// A 2025-11-25 stream that breaks on the upstream's side (reverse_proxy
// aborts the answer, or the connection is reset) after an event with an id
// is resumed with GET and Last-Event-ID, within maxResumes resumes in a row
// that bring no new event (one that does starts the count and the backoff
// over); one that broke
// before any id, outside a session, or after the gateway itself stopped
// reading or ended the call, is not, and the failure says the stream
// broke. A resume after a break, or after a GET that could not reach the
// upstream (tried again: a proxy in between restarts), waits half a
// second, doubled at each, up to 5 s, or the stream's retry if longer: not
// ten GETs at once into whatever broke it. A stream the upstream ended
// cleanly is resumed after its retry, as before.
func TestAttemptResumesBrokenStream(t *testing.T) {
	t.Parallel()
	final := `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`
	note := `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	// Broken at every resume before a new event: the budget runs out.
	many := []func(http.ResponseWriter, *http.Request) error{streamThen(aborted, "id: e0\ndata: "+note+"\n\n")}
	manySeen := []string{"POST"}
	for range maxResumes + 1 {
		many = append(many, streamThen(aborted))
	}
	for range maxResumes {
		manySeen = append(manySeen, "GET after e0")
	}
	manyWant := []string{"notification notifications/progress",
		fmt.Sprintf("failed: the upstream's event stream broke before the response to the call (resumed %d times without a new event): the upstream answer was aborted", maxResumes)}
	backoff := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second,
		5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second}
	// Broken after a new event each time, more often than maxResumes: a
	// long call behind a proxy that cuts its stream now and then goes on,
	// each resume after the first wait.
	progressing := []func(http.ResponseWriter, *http.Request) error{}
	progressingSeen := []string{"POST"}
	progressingWant := []string{}
	progressingWaits := []time.Duration{}
	for i := range 2 * maxResumes {
		progressing = append(progressing, streamThen(aborted, fmt.Sprintf("id: e%d\ndata: %s\n\n", i, note)))
		progressingSeen = append(progressingSeen, fmt.Sprintf("GET after e%d", i))
		progressingWant = append(progressingWant, "notification notifications/progress")
		progressingWaits = append(progressingWaits, backoff[0])
	}
	progressing = append(progressing, streamThen(nil, "data: "+final+"\n\n"))
	progressingWant = append(progressingWant, `final {"content":[]} (HTTP 200)`)
	// Ended cleanly at once with a new event id each time, retry 0: each
	// resume is progress, which renews the budget, so only the floor on
	// the wait after a resume keeps the gateway from asking again at
	// once, for as long as such an upstream goes on.
	hasty := []func(http.ResponseWriter, *http.Request) error{}
	hastySeen := []string{"POST"}
	hastyWant := []string{}
	hastyWaits := []time.Duration{}
	for i := range 2 * maxResumes {
		hasty = append(hasty, streamThen(nil, fmt.Sprintf("id: e%d\nretry: 0\ndata: %s\n\n", i, note)))
		hastySeen = append(hastySeen, fmt.Sprintf("GET after e%d", i))
		hastyWant = append(hastyWant, "notification notifications/progress")
		wait := cleanResumeFloor
		if i == 0 {
			wait = 0 // the POST's stream: its retry
		}
		hastyWaits = append(hastyWaits, wait)
	}
	hasty = append(hasty, streamThen(nil, "data: "+final+"\n\n"))
	hastyWant = append(hastyWant, `final {"content":[]} (HTTP 200)`)
	unreachable := []func(http.ResponseWriter, *http.Request) error{streamThen(aborted, "id: e1\ndata: "+note+"\n\n")}
	unreachableSeen := []string{"POST"}
	for range maxResumes {
		unreachable = append(unreachable, refused)
		unreachableSeen = append(unreachableSeen, "GET after e1")
	}
	tests := []resumeCase{
		{
			name:    "aborted after an id, resumed and answered",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(aborted, "id: e1\nretry: 5\ndata: \n\n", "id: e2\ndata: "+note+"\n\n", "data: "+note[:10]),
				streamThen(nil, "id: e3\ndata: "+final+"\n\n"),
			},
			want:      []string{"notification notifications/progress", `final {"content":[]} (HTTP 200)`},
			wantSeen:  []string{"POST", "GET after e2"},
			wantWaits: backoff[:1],
		},
		{
			name:    "a longer retry is kept",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(aborted, "id: e1\nretry: 3000\ndata: "+note+"\n\n"),
				streamThen(nil, "data: "+final+"\n\n"),
			},
			want:      []string{"notification notifications/progress", `final {"content":[]} (HTTP 200)`},
			wantSeen:  []string{"POST", "GET after e1"},
			wantWaits: []time.Duration{3 * time.Second},
		},
		{
			name:    "ended cleanly, resumed after its retry",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(nil, "id: e1\nretry: 5\ndata: "+note+"\n\n"),
				streamThen(nil, "data: "+final+"\n\n"),
			},
			want:      []string{"notification notifications/progress", `final {"content":[]} (HTTP 200)`},
			wantSeen:  []string{"POST", "GET after e1"},
			wantWaits: []time.Duration{5 * time.Millisecond},
		},
		{
			name:    "a resume that cannot reach the upstream, tried again",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(aborted, "id: e1\ndata: "+note+"\n\n"),
				refused,
				refused,
				streamThen(nil, "data: "+final+"\n\n"),
			},
			want:      []string{"notification notifications/progress", `final {"content":[]} (HTTP 200)`},
			wantSeen:  []string{"POST", "GET after e1", "GET after e1", "GET after e1"},
			wantWaits: backoff[:3],
		},
		{
			name:      "a resume that never reaches the upstream",
			session:   "s-1",
			answers:   unreachable,
			want:      []string{"notification notifications/progress", "failed: resuming the upstream stream: calling upstream: dialing: dial tcp: connection refused"},
			wantSeen:  unreachableSeen,
			wantWaits: backoff,
		},
		{
			name:    "reset after an id, resumed twice and answered",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(reset, "id: e1\ndata: "+note+"\n\n"),
				streamThen(aborted, "id: e2\ndata: "+note+"\n\n"),
				streamThen(nil, "data: "+final+"\n\n"),
			},
			want:      []string{"notification notifications/progress", "notification notifications/progress", `final {"content":[]} (HTTP 200)`},
			wantSeen:  []string{"POST", "GET after e1", "GET after e2"},
			wantWaits: []time.Duration{backoff[0], backoff[0]}, // e2 was progress: the backoff starts over
		},
		{
			name:    "broken before any id",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(aborted, "data: "+note+"\n\n"),
			},
			want:     []string{"notification notifications/progress", "failed: the upstream's event stream broke before the response to the call (it gave no event id to resume it from): the upstream answer was aborted"},
			wantSeen: []string{"POST"},
		},
		{
			name: "broken outside a session (2026-07-28)",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(aborted, "id: e1\ndata: "+note+"\n\n"),
			},
			want:     []string{"notification notifications/progress", "failed: the upstream's event stream broke before the response to the call (a stream outside a 2025-11-25 session cannot be resumed): the upstream answer was aborted"},
			wantSeen: []string{"POST"},
		},
		{
			name:    "broken after the gateway stopped reading (malformed event)",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(aborted, "id: e1\ndata: "+note+"\n\n", "id: e2\ndata: {\n\n"),
			},
			want:     []string{"notification notifications/progress", "failed: upstream event is not JSON-RPC: "},
			wantSeen: []string{"POST"},
		},
		{
			name:    "broken after the gateway ended the call",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(func(r *http.Request) error {
					<-r.Context().Done()
					panic(http.ErrAbortHandler)
				}, "id: e1\ndata: "+note+"\n\n"),
			},
			cancelled: true,
			want:      []string{"notification notifications/progress", "failed: task cancelled"},
			wantSeen:  []string{"POST"},
		},
		{
			name:      "broken more often than resumed",
			session:   "s-1",
			answers:   many,
			want:      manyWant,
			wantSeen:  manySeen,
			wantWaits: backoff,
		},
		{
			name:      "broken after progress each time, more often than the budget",
			session:   "s-1",
			answers:   progressing,
			want:      progressingWant,
			wantSeen:  progressingSeen,
			wantWaits: progressingWaits,
		},
		{
			name:      "ended cleanly at once with a new id each time",
			session:   "s-1",
			answers:   hasty,
			want:      hastyWant,
			wantSeen:  hastySeen,
			wantWaits: hastyWaits,
		},
		{
			name:    "resumption refused",
			session: "s-1",
			answers: []func(http.ResponseWriter, *http.Request) error{
				streamThen(aborted, "id: e1\ndata: "+note+"\n\n"),
				func(w http.ResponseWriter, _ *http.Request) error {
					http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
					return nil
				},
			},
			want:      []string{"notification notifications/progress", "error -32603 upstream answered HTTP 405: method not allowed (HTTP 405"},
			wantSeen:  []string{"POST", "GET after e1"},
			wantWaits: backoff[:1],
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, tt.run)
		})
	}
}

// resumeCase is one case of TestAttemptResumesBrokenStream, run in a
// synctest bubble, whose clock tells the waits before each request.
type resumeCase struct {
	name      string
	session   string
	answers   []func(http.ResponseWriter, *http.Request) error
	cancelled bool // the attempt's context ends once the first request has its events
	want      []string
	wantSeen  []string
	wantWaits []time.Duration // before each request after the first
}

func (tt resumeCase) run(t *testing.T) {
	t.Helper()
	// The shared pool's idle runners wait on a channel of no bubble; this
	// one's end, on the bubble's clock, as the test ends.
	t.Cleanup(func() { time.Sleep(2 * time.Second) })
	up := &resumingUpstream{answers: tt.answers}
	ctx, cancel := context.WithCancelCause(runners.WithPool(WithMaxResult(t.Context(), 1000), runners.NewPool(time.Second)))
	defer cancel(nil)
	ctx = WithDetach(ctx, func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) })
	base := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/mcp", http.NoBody)
	if tt.session != "" {
		base.Header.Set(HeaderSessionID, tt.session)
	}
	a := StartAttempt(ctx, base, up, json.RawMessage(`7`), []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}`))
	var got []string
	ev, _ := a.Until(ctx, nil, func(ev Event) bool {
		got = append(got, describe(ev))
		if tt.cancelled {
			cancel(fmt.Errorf("task cancelled"))
		}
		return false
	})
	got = append(got, describe(ev))
	for range a.Events { // until the pump returned: no request comes after
	}
	if len(got) != len(tt.want) {
		t.Fatalf("events %q, want %q", got, tt.want)
	}
	for i := range got {
		if !strings.HasPrefix(got[i], tt.want[i]) {
			t.Errorf("event %d: %q, want %q", i, got[i], tt.want[i])
		}
	}
	if seen := up.seen(); strings.Join(seen, "; ") != strings.Join(tt.wantSeen, "; ") {
		t.Errorf("the upstream saw %q, want %q", seen, tt.wantSeen)
	}
	if waits := up.waits(); fmt.Sprint(waits) != fmt.Sprint(tt.wantWaits) {
		t.Errorf("waits before each resume %v, want %v", waits, tt.wantWaits)
	}
}
