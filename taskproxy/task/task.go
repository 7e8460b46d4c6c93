package task

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// Status is a task's lifecycle state; the names are the wire names of both
// protocol eras.
type Status string

// The task states.
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Terminal reports whether s is final: completed, failed or cancelled.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// CanTransition reports whether a task may move from one status to another.
// A task is created working; working and input_required may go to each other
// or to any terminal state; terminal states never change. Staying in a
// non-terminal state is allowed, so that a record can be updated without a
// status change.
func CanTransition(from, to Status) bool {
	switch from {
	case StatusWorking, StatusInputRequired:
		switch to {
		case StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled:
			return true
		}
	}
	return false
}

// Era names the protocol generation a task was created under.
type Era string

// The protocol eras.
const (
	Era2025 Era = "2025-11-25"
	Era2026 Era = "2026-07-28"
)

// Task is the durable record of one task. Both wire adapters render it.
type Task struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// QuotaKey, when set, is whom the task counts against for the bounds
	// of Limits instead of its Owner (see Quota): the gateway sets it for
	// task.Anonymous callers to their client address, so that one client
	// of a route without authentication cannot use up the bounds of every
	// other. Visibility does not change: the task is still its Owner's.
	// Quota keys and owners are one namespace; the gateway's quota keys
	// ("ip:" and an address) are never an owner key of the glue's.
	QuotaKey string `json:"quotaKey,omitempty"`
	// Principal and Tenant name the owner in the audit log.
	Principal     string        `json:"principal,omitempty"`
	Tenant        string        `json:"tenant,omitempty"`
	Status        Status        `json:"status"`
	StatusMessage string        `json:"statusMessage,omitempty"`
	CreatedAt     time.Time     `json:"createdAt"`
	UpdatedAt     time.Time     `json:"updatedAt"`
	TTL           time.Duration `json:"ttl"`
	PollInterval  time.Duration `json:"pollInterval"`
	Era           Era           `json:"era"`

	// Tool is the name of the tool called; Params the original tools/call
	// params as the upstream receives them (params.task removed).
	Tool   string          `json:"tool"`
	Params json.RawMessage `json:"params"`
	// Session is the client's Mcp-Session-Id the call runs on (2025-11-25).
	Session string `json:"session,omitempty"`
	// UpstreamID is the JSON-RPC id of the call as the upstream knows it,
	// and Round the number of the upstream attempt it belongs to: a
	// 2026-07-28 task makes one attempt per round of input.
	UpstreamID json.RawMessage `json:"upstreamId,omitempty"`
	Round      int             `json:"round,omitempty"`
	// UpstreamTask says the upstream runs the call as a task of its own
	// (a task-aware upstream): the worker creates it there with params.task and
	// follows it. UpstreamTaskID is the upstream's id of that task, once
	// created; a restart resumes following it.
	UpstreamTask   bool   `json:"upstreamTask,omitempty"`
	UpstreamTaskID string `json:"upstreamTaskId,omitempty"`
	// UpstreamV2026 says the upstream's task is a 2026-07-28 one (the
	// tasks extension): it is followed with tasks/get and answered with
	// tasks/update, not with tasks/result.
	UpstreamV2026 bool `json:"upstreamV2026,omitempty"`

	// Inputs are the input requests met during the task, in order; their
	// keys are never reused.
	Inputs       []InputRequest `json:"inputs,omitempty"`
	NextInputKey int            `json:"nextInputKey,omitempty"`

	// Result is the upstream's result object; jsonrpc.Error its JSON-RPC error, or
	// the gateway's account of a failure that had none.
	Result json.RawMessage `json:"result,omitempty"`
	Error  *jsonrpc.Error  `json:"error,omitempty"`
	// IsError records a tool result with isError:true (failed on 2025-11-25,
	// completed on 2026-07-28).
	IsError bool `json:"isError,omitempty"`

	// Lease names the worker running the task.
	Lease Lease `json:"lease,omitzero"`
	// IdempotencyKey is the hash of the client's idempotency key, and
	// Fingerprint the hash of the tool name and arguments it was used with.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	Fingerprint    string `json:"fingerprint,omitempty"`
	// Endpoint, Host and Headers are what a re-run after a restart needs of
	// the original request: its path, host, and MCP routing headers (never
	// credentials).
	Endpoint string            `json:"endpoint,omitempty"`
	Host     string            `json:"host,omitempty"`
	Headers  map[string]string `json:"headers,omitempty"`
	// EntryURI is the request URI the call arrived with at the server,
	// when the server changed it before the gateway saw it (handle_path
	// strips its prefix, a rewrite): the gateway's own request after a
	// restart goes there to reach the route, while the call itself goes
	// on to Endpoint. Empty when it is Endpoint.
	EntryURI string `json:"entryUri,omitempty"`
	// Route is the route (handler instance) that created the task, the
	// one a re-run after a restart goes through (Config.Route).
	Route string `json:"route,omitempty"`

	// RequestState is the upstream's opaque state from its last
	// input_required answer (2026-07-28), echoed on the retry; it never
	// reaches the client.
	RequestState string `json:"requestState,omitempty"`
	// LoadShed counts input_required answers without input requests.
	LoadShed int `json:"loadShed,omitempty"`

	// History records the task's status changes, oldest first, for
	// operators (the admin API); at most maxHistory are kept, the first
	// and the latest ones.
	History []StatusChange `json:"history,omitempty"`

	// TraceParent and TraceState are the W3C trace context (the
	// traceparent and tracestate header values) of the request that
	// created the task, when it was traced: the task's spans continue
	// that trace in any process, and a re-run links to it. Empty when
	// the create was not traced.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
}

// TraceIDs returns the trace id and span id of the task's TraceParent
// (lowercase hex), or empty strings when it has none or it is malformed.
func (t *Task) TraceIDs() (traceID, spanID string) {
	// version "-" trace-id (32 hex) "-" parent-id (16 hex) "-" flags
	p := t.TraceParent
	if len(p) < 55 || p[2] != '-' || p[35] != '-' || p[52] != '-' || !lowerHex(p[3:35]) || !lowerHex(p[36:52]) {
		return "", ""
	}
	return p[3:35], p[36:52]
}

// lowerHex reports whether s is lowercase hex digits, not all zero (the
// invalid id of W3C trace context).
func lowerHex(s string) bool {
	nonZero := false
	for i := range len(s) {
		switch c := s[i]; {
		case c >= '1' && c <= '9', c >= 'a' && c <= 'f':
			nonZero = true
		case c == '0':
		default:
			return false
		}
	}
	return nonZero
}

// StatusChange is one status change of a task.
type StatusChange struct {
	From    Status    `json:"from"`
	To      Status    `json:"to"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// maxHistory bounds a task's History: a task that goes back and forth
// between working and input_required many times keeps its first change and
// its latest ones, so the record stays small.
const maxHistory = 32

// InputRequest is a request for input the upstream made during a task.
type InputRequest struct {
	// Key identifies the request for the task's whole life.
	Key    string          `json:"key"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params,omitempty"`
	// UpstreamID is the id of the upstream's JSON-RPC request (2025-11-25
	// server-to-client requests), answered with that id.
	UpstreamID json.RawMessage `json:"upstreamId,omitempty"`
	// UpstreamKey is the upstream's own key of a 2026-07-28 input request;
	// the answer goes back under it on the retry.
	UpstreamKey string `json:"upstreamKey,omitempty"`
	// Round is the upstream attempt whose answer asked for it.
	Round    int  `json:"round,omitempty"`
	Answered bool `json:"answered,omitempty"`
	// Response is the client's answer to an UpstreamKey request.
	Response json.RawMessage `json:"response,omitempty"`
}

// Quota is whom the task counts against for the bounds of Limits: its
// QuotaKey, or its Owner when it has none (every record written before
// quota keys, and every authenticated caller's).
func (t *Task) Quota() string {
	if t.QuotaKey != "" {
		return t.QuotaKey
	}
	return t.Owner
}

// ExpiresAt is when the task may be deleted: ttl after creation.
func (t *Task) ExpiresAt() time.Time { return t.CreatedAt.Add(t.TTL) }

// Outstanding returns the input requests not yet answered.
func (t *Task) Outstanding() []InputRequest {
	var out []InputRequest
	for _, in := range t.Inputs {
		if !in.Answered {
			out = append(out, in)
		}
	}
	return out
}

// AddInput records an input request under a fresh key and returns the key.
func (t *Task) AddInput(in InputRequest) string {
	t.NextInputKey++
	in.Key = fmt.Sprint(t.NextInputKey)
	t.Inputs = append(t.Inputs, in)
	return in.Key
}

// Input returns the input request with key.
func (t *Task) Input(key string) (*InputRequest, bool) {
	for i := range t.Inputs {
		if t.Inputs[i].Key == key {
			return &t.Inputs[i], true
		}
	}
	return nil, false
}

// RoundInputs returns the keys of the 2026-07-28 input requests of the
// current round.
func (t *Task) RoundInputs() []string {
	var keys []string
	for _, in := range t.Inputs {
		if in.UpstreamKey != "" && in.Round == t.Round {
			keys = append(keys, in.Key)
		}
	}
	return keys
}

// AnswersFor returns the answers to the input requests with keys, by the
// upstream's keys, once every one of them is answered.
func (t *Task) AnswersFor(keys []string) (map[string]json.RawMessage, bool) {
	answers := make(map[string]json.RawMessage, len(keys))
	for _, k := range keys {
		in, ok := t.Input(k)
		if !ok || !in.Answered {
			return nil, false
		}
		answers[in.UpstreamKey] = in.Response
	}
	return answers, true
}

// SetStatus moves the task to status, checking the state machine.
func (t *Task) SetStatus(to Status, message string, now time.Time) error {
	if !CanTransition(t.Status, to) {
		return fmt.Errorf("%w: %s to %s", ErrBadTransition, t.Status, to)
	}
	if to != t.Status {
		t.recordChange(StatusChange{From: t.Status, To: to, Message: message, At: now})
	}
	t.Status = to
	t.StatusMessage = message
	t.UpdatedAt = now
	return nil
}

// Rerun sets the task working on a new run of its call (a re-run after a
// restart), with message saying why, and records that in the history even
// when the task was working already: the run that follows replaces the
// status message, and a completed task keeps none, so the history is where
// an operator still sees that the result came from a second run.
func (t *Task) Rerun(message string, now time.Time) error {
	if !CanTransition(t.Status, StatusWorking) {
		return fmt.Errorf("%w: %s to %s", ErrBadTransition, t.Status, StatusWorking)
	}
	t.recordChange(StatusChange{From: t.Status, To: StatusWorking, Message: message, At: now})
	t.Status = StatusWorking
	t.StatusMessage = message
	t.UpdatedAt = now
	return nil
}

// recordChange appends c to the history, dropping the oldest change after
// the first once the history is full.
func (t *Task) recordChange(c StatusChange) {
	if len(t.History) >= maxHistory {
		t.History = append(t.History[:1:1], t.History[len(t.History)-maxHistory+2:]...)
	}
	t.History = append(t.History, c)
}

// NewTaskID returns a random, URL-safe task id of 22 characters (128
// random bits, less the one first character in 64 that is a dash: an id
// never begins with "-", so a command line takes it as an argument).
func NewTaskID() string {
	var b [16]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("reading random bytes for a task id: %v", err)) // crypto/rand never fails on supported platforms
		}
		// An id that begins with "-" reads as a flag on a command line
		// (caddy mcp-tasks cancel <id>): one in 64 would; draw again.
		if b[0]>>2 != 62 {
			return base64.RawURLEncoding.EncodeToString(b[:])
		}
	}
}

// Clone returns a deep enough copy for a compare-and-set: slices that an
// update may change are copied.
func (t *Task) Clone() *Task {
	c := *t
	c.Inputs = append([]InputRequest(nil), t.Inputs...)
	c.History = append([]StatusChange(nil), t.History...)
	if t.Error != nil {
		e := *t.Error
		c.Error = &e
	}
	return &c
}
