package wire

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Policy is what one configuration decides for the requests both protocol
// versions answer (the fields' meaning is on the root's Config).
type Policy struct {
	TaskAfter, DefaultTTL, MaxTTL, PollInterval time.Duration
	MaxActivePerOwner, MaxFinishedPerOwner      int
	MaxWatchedPerOwner                          int
	ListTasks, StrictRoutingHeaders             bool
	MaxResultBytes                              int64
	// RouteName is the route tasks record (Config.Route).
	RouteName string
	// EntryURI returns the URI a request arrived with at the server
	// (Config.EntryURI); nil when the glue does not know it.
	EntryURI func(r *http.Request) string
	// Rebinding says when the DNS rebinding guard applies.
	Rebinding Rebinding
	// Detach returns a copy of a request that outlives it, for workers.
	Detach func(r *http.Request) *http.Request
	// Peer reports what the server knows of the client of a request
	// beyond its connection (Config.Peer); nil, or ok false, leaves it to
	// what the request's context carries (task.WithPeer).
	Peer func(r *http.Request) (p task.Peer, ok bool)
	// Stopping is closed when the server stops; long-lived streams end.
	Stopping <-chan struct{}
	// Observer receives lifecycle counts; nil ignores them.
	Observer task.Observer
	// RunTimeout and ToolRunTimeouts bound how long a tool may run
	// (Config.RunTimeout, Config.ToolRunTimeouts): the runtime's workers
	// apply them to tasks, the 2026-07-28 wire and the reverse version
	// bridge to a plain client's call that waits on an upstream task.
	RunTimeout      time.Duration
	ToolRunTimeouts map[string]time.Duration
}

// RunTimeoutOf is the run_timeout of tool: its own, else the route's; 0
// means none.
func (p *Policy) RunTimeoutOf(tool string) time.Duration {
	if d, ok := p.ToolRunTimeouts[tool]; ok {
		return d
	}
	return p.RunTimeout
}

// Env is one configuration's services, shared by every exchange it serves:
// its policy, loggers, the task runtime and its route, and the gate's
// tables.
type Env struct {
	Policy
	Log, AuditLog *zap.Logger
	Runtime       *runtime.Runtime
	// Route is the runtime's route of this configuration: its tasks'
	// workers, audit, cancellation and input answers.
	Route    *runtime.Route
	Limiter  *gate.RateLimiter
	Streams  *gate.StreamTable
	Tools    *ToolPolicy
	Sessions *SessionGuard
	// Probes is what the gateway learned of its upstream endpoints by
	// asking them itself (the protocol they speak, whether they run
	// tasks).
	Probes *Probes
	// RebindingRefusals logs the DNS rebinding guard's refusals.
	RebindingRefusals RebindingNote
}

// Exchange is one client request the gateway looks at, and its answer.
// The protocol packages wrap it in types of their own; what both versions
// do with a request (answer, refuse, guard, make and look up tasks) is
// here.
type Exchange struct {
	*Env
	W      http.ResponseWriter
	R      *http.Request
	Next   http.Handler
	Msg    *jsonrpc.Message
	Owner  string
	Caller task.Caller
	// ParsedParams are the params jsonrpc.ParseInto read from the
	// request's body, valid JSON: params that are still these need not be
	// validated again.
	ParsedParams json.RawMessage

	// contentType is the Content-Type header value of the answer:
	// allocated with the exchange rather than on its own. A header
	// value is the answer's own (Caddy's header handler may edit it in
	// place), so it is never shared with another answer.
	contentType [1]string
}

// Pass hands the request to the next handler unchanged.
func (c *Exchange) Pass() error { return upstream.ServeNext(c.Next, c.W, c.R) }

// validParams reports whether params are the request's ParsedParams (the
// same bytes, not merely equal ones), so valid JSON.
func (c *Exchange) validParams(params []byte) bool {
	return len(params) > 0 && len(params) == len(c.ParsedParams) && &params[0] == &c.ParsedParams[0]
}

// Reply writes a JSON-RPC success response.
func (c *Exchange) Reply(result any) error {
	data, err := jsonrpc.ResponseBytes(c.Msg.ID, result)
	if err != nil {
		c.Fail(rpcerr.InternalError(c.Log, "encoding a result", err, zap.String("method", c.Msg.Method)))
		return nil
	}
	WriteJSON(c.W, http.StatusOK, data)
	return nil
}

// ReplyRaw writes a JSON-RPC success response around result, already
// encoded, without encoding it again, built in a buffer that serves the
// next answer: a ResponseWriter copies what it is given (io.Writer's
// contract), and every poll and create is answered so.
func (c *Exchange) ReplyRaw(result []byte) {
	buf := answerBufs.Get().(*[]byte)
	data := jsonrpc.AppendResponseRaw((*buf)[:0], c.Msg.ID, result)
	c.contentType[0] = jsonContentType
	writeJSONTyped(c.W, http.StatusOK, data, c.contentType[:], jsonPieceTimeout)
	if cap(data) <= maxPooledAnswer {
		*buf = data[:0]
		answerBufs.Put(buf)
	}
}

// answerBufs holds ReplyRaw's buffers; one larger than maxPooledAnswer
// (an answer with a large result) is left to the collector.
var answerBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledAnswer = 16 << 10

// Fail writes a JSON-RPC error response with HTTP 200, as the 2025-11-25
// transport does for errors of a request it accepted.
func (c *Exchange) Fail(e *jsonrpc.Error) {
	TraceFailure(c.R, e)
	WriteError(c.W, http.StatusOK, c.Msg.ID, e)
}

// TraceFailure records e on the span of r, when r is traced: the span of
// a task method (mcp.task.get, ...), or the request's own.
func TraceFailure(r *http.Request, e *jsonrpc.Error) {
	if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
		span.SetStatus(codes.Error, e.Message)
		span.SetAttributes(attribute.Int("rpc.jsonrpc.error_code", e.Code))
	}
}

// WriteJSON writes a JSON body with status; a large one must be taken by
// the client at a pace ([writeBody]).
func WriteJSON(w http.ResponseWriter, status int, data []byte) {
	writeJSON(w, status, data, jsonPieceTimeout)
}

// writeJSON is WriteJSON with the time each piece of a large answer may
// take (the tests' is short).
func writeJSON(w http.ResponseWriter, status int, data []byte, pieceTimeout time.Duration) {
	writeJSONTyped(w, status, data, []string{jsonContentType}, pieceTimeout)
}

// writeJSONTyped is writeJSON with the Content-Type header's value, a
// slice the answer may keep. The header is set by its canonical name,
// as Header.Set would after canonicalising it.
func writeJSONTyped(w http.ResponseWriter, status int, data []byte, contentType []string, pieceTimeout time.Duration) {
	h := w.Header()
	h["Content-Type"] = contentType
	delete(h, "Content-Length")
	w.WriteHeader(status)
	writeBody(w, data, pieceTimeout)
}

const jsonContentType = "application/json"

// AnswerStatus is the HTTP status of an error answer that would be sent
// with status: 503 for a store that is unavailable (e marked Unavailable).
// A 503 gets Retry-After.
func AnswerStatus(w http.ResponseWriter, status int, e *jsonrpc.Error) int {
	if e != nil && e.Unavailable {
		status = http.StatusServiceUnavailable
	}
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", rpcerr.StoreRetryAfter)
	}
	return status
}

// WriteError writes the JSON-RPC error e for request id with status (503
// when the store is unavailable, see AnswerStatus).
func WriteError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpc.Error) {
	WriteJSON(w, AnswerStatus(w, status, e), jsonrpc.ErrorBytes(id, e))
}

// AcceptsSSE reports whether the client takes an event stream.
func AcceptsSSE(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// RefusesCaller reports whether an upstream HTTP status refuses the caller
// rather than answering the call: 401 and 403.
func RefusesCaller(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// KeepAliveInterval spaces SSE comments on idle streams, so proxies and
// clients do not time them out.
const KeepAliveInterval = 15 * time.Second

// ISOMillis is how both versions write a task's times.
const ISOMillis = "2006-01-02T15:04:05.000Z07:00"

// The _meta keys and the extension both versions' code reads.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	ExtensionTasks         = "io.modelcontextprotocol/tasks"
)

// Endpoint names the upstream endpoint a request goes to: a route may
// serve several hosts and paths, and each may be another server.
func Endpoint(r *http.Request) string {
	return strings.ToLower(r.Host) + r.URL.Path
}

// ProbeTTL is how long what the gateway learned by asking an upstream
// endpoint itself (its protocol, whether it runs tasks) is kept: an
// upstream that is upgraded (or replaced) is noticed after at most this
// long.
const ProbeTTL = 5 * time.Minute

// MaxProbeVerdicts bounds the endpoints whose probe answers one route
// keeps: a route matching a prefix serves any path a caller sends.
const MaxProbeVerdicts = 64

// UpstreamOwner is whom what the gateway holds of the caller's work at the
// upstream belongs to (an upstream session of the version bridge, an
// upstream task waiting for a plain client's input): the caller's owner
// key. task.Anonymous callers are one owner to the gateway, but not to an
// upstream that authenticates them itself with the bearer token each one
// sends: what one caller's credentials opened must never serve a request
// bearing another's, so for anonymous callers the credentials the upstream
// sees count too, as a digest.
func (c *Exchange) UpstreamOwner() string {
	if c.Owner != task.Anonymous {
		return c.Owner
	}
	auth := c.R.Header.Values("Authorization")
	if len(auth) == 0 {
		return c.Owner
	}
	return c.Owner + "\x00" + gate.HashHex(strings.Join(auth, "\n"))
}
