package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/bridge"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/bridge/v2025on2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2025 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2025"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// ErrorHandler is an http.Handler that can also report the error its chain
// ended with, as Caddy's handlers do. Hand the gateway a next handler that
// implements it, and a pass-through keeps Caddy's error handling and a
// worker learns why its upstream call failed.
type ErrorHandler interface {
	http.Handler
	ServeHTTPErr(w http.ResponseWriter, r *http.Request) error
}

// Config is what one loaded configuration asks of the gateway.
type Config struct {
	// TaskAfter is how long a 2026-07-28 call may run before it becomes a task.
	TaskAfter time.Duration
	// DefaultTTL applies when a request asks for none; MaxTTL caps them.
	DefaultTTL, MaxTTL time.Duration
	// PollInterval is suggested to clients.
	PollInterval time.Duration
	// MaxActivePerOwner caps the non-terminal tasks of one owner; 0 means
	// no cap.
	MaxActivePerOwner int
	// MaxFinishedPerOwner caps the finished tasks one owner keeps (until
	// their ttl ends): at it, creates are refused; 0 means no cap.
	MaxFinishedPerOwner int
	// MaxWatchedPerOwner caps the task ids one owner's open
	// subscriptions/listen streams watch together: a listen that would
	// pass it is refused with -32602. 0 means the default,
	// gate.DefaultMaxWatchedPerOwner (2000).
	MaxWatchedPerOwner int
	// DefaultTaskSupport applies to tools not in Tools.
	DefaultTaskSupport task.Support
	// Tools holds per-tool task modes.
	Tools map[string]task.Support
	// MaxBody caps request bodies; larger ones get 413.
	MaxBody int64
	// PassUnreadable hands a POST body that is not one JSON-RPC message the
	// gateway can read exactly as an upstream's JSON reader would (a batch,
	// bytes after the message, keys that differ only in case, a charset
	// other than UTF-8) to the next handler unread, instead of refusing it
	// with HTTP 400 (415 for the charset). Whatever the upstream then runs
	// escapes the gateway's tool modes, quotas, tasks and audit log: leave
	// it off unless the upstream refuses such bodies itself.
	PassUnreadable bool
	// StrictRoutingHeaders refuses a 2026-07-28 tasks/get, tasks/update or
	// tasks/cancel without the Mcp-Name header with HTTP 400 / -32020, as
	// the tasks extension's MUST says. By default the gateway takes the
	// missing header from params.taskId, as FastMCP servers do, since
	// FastMCP's tasks client omits it; a header that disagrees with the
	// body is refused either way.
	StrictRoutingHeaders bool
	// MaxResultBytes caps one message of an upstream answer (above all the
	// result of a call, and each event of its stream): a task whose
	// upstream sends more fails with "result too large (N bytes, limit M)",
	// and a call that has not become a task gets that error. 0 means
	// DefaultMaxResultBytes.
	MaxResultBytes int64
	// ListTasks enables tasks/list. Only set it when owners are real
	// authenticated principals: anonymous callers would see each other's
	// tasks.
	ListTasks bool
	// Detach returns a copy of r that outlives the client's request, for
	// workers, with headers of its own (a deep copy, as Request.Clone
	// makes: the gateway edits them). Nil clones r onto
	// context.WithoutCancel. For a re-run after a restart
	// (task.IsRerun of r's context) r is another caller's request: the copy must
	// carry none of that caller's connection or authentication state.
	Detach func(r *http.Request) *http.Request
	// Peer, when set, reports what the server knows of the client of r
	// beyond its connection (its address behind trusted proxies, and
	// whether one sent it), and ok false when it knows nothing more: it
	// is asked only when a request needs it, where WithPeer costs every
	// request a copy of it. Nil, or ok false: what WithPeer put in r's
	// context, else r.RemoteAddr.
	Peer func(r *http.Request) (p task.Peer, ok bool)
	// RetryOnRestart names the tools whose calls are idempotent: a task of
	// theirs that was running when the gateway died is re-run on restart
	// instead of failed.
	RetryOnRestart map[string]bool
	// RunTimeout bounds how long a task's tool may run (time waiting for
	// the client's input aside): after it the upstream call is cancelled
	// and the task fails with a message naming the limit. 0 means no bound
	// but the task's ttl. ToolRunTimeouts holds per-tool limits, which
	// take precedence (0 there: none for that tool). They bound as well a
	// plain call that waits on an upstream task (a tool the upstream runs
	// only as a task; a 2026-07-28 client's, or a 2025-11-25 client's
	// through the reverse version bridge): the call fails the same way and
	// the upstream's task is cancelled.
	RunTimeout      time.Duration
	ToolRunTimeouts map[string]time.Duration
	// SweepInterval spaces the deletion of expired tasks; 0 means a minute.
	SweepInterval time.Duration
	// LeaseTTL is how long a task's lease lasts; it is renewed every third
	// of it, and a replica that dies leaves its tasks to the others after
	// it (plus at most a third of it). 0 means DefaultLeaseTTL; otherwise
	// between MinLeaseTTL and MaxLeaseTTL. Configurations sharing a
	// runtime follow the one that started last.
	LeaseTTL time.Duration
	// ResumeWait is how long a task taken over or recovered waits, holding
	// its lease, for its route to serve a request here before the lease is
	// released for a replica that serves the route; it keeps
	// waiting here too. 0 means twice the lease ttl.
	ResumeWait time.Duration
	// RequestBase, when set, is called when a task taken over or recovered
	// waits for its route to serve a request (ResumeWait): it should make
	// the route serve one of the gateway's own, to t's endpoint and host,
	// whose handler hands it to ServeBase instead of ServeHTTP, so that the
	// task runs without waiting for a client's request. ctx ends when the
	// runtime closes. Nil: such tasks wait for a client's request.
	RequestBase func(ctx context.Context, t *task.Task)
	// EntryURI, when set, returns the request URI r arrived with at the
	// server, before the server rewrote it (a stripped prefix, a rewrite);
	// a task records it (task.Task.EntryURI) so that RequestBase's request
	// after a restart reaches the route through the same rewrites. Nil or
	// "": r's own URI is where the route is reached.
	EntryURI func(r *http.Request) string
	// RateLimit caps task operations (get, result, list, update, cancel,
	// listen, input answers) and initialize per owner per second; 0 means
	// no limit.
	RateLimit float64
	// RebindingProtection says when requests the gateway answers itself
	// are checked for DNS rebinding (Host and Origin); "" means RebindingAuto.
	RebindingProtection RebindingProtection
	// Stopping is closed when the server stops; long-lived streams end.
	Stopping <-chan struct{}
	// Logger receives the gateway's logs; nil discards them.
	Logger *zap.Logger
	// AuditLogger receives the task lifecycle audit log; nil discards it.
	AuditLogger *zap.Logger
	// Observer receives lifecycle counts for metrics; nil ignores them.
	Observer task.Observer
	// Route identifies the handler instance (site and route) this
	// configuration serves, stably across restarts. Tasks record it, and a
	// re-run after a restart goes only through a gateway of the same route,
	// with that route's RetryOnRestart. Gateways on one runtime that serve
	// different handlers must have different routes.
	Route string
}

// The lease ttl's default and bounds (Config.LeaseTTL).
const (
	DefaultLeaseTTL = runtime.LeaseTTL
	MinLeaseTTL     = runtime.MinLeaseTTL
	MaxLeaseTTL     = runtime.MaxLeaseTTL
)

// DefaultMaxResultBytes is the default Config.MaxResultBytes: 8 MiB, far
// above what a tool result normally is, and small enough that a task
// record stays well within the store's limits.
const DefaultMaxResultBytes = upstream.DefaultMaxResultBytes

// Gateway serves one configuration.
type Gateway struct {
	cfg Config
	rt  *Runtime
	// env is what every exchange of this configuration shares: the
	// policy, loggers, the runtime's route, the gate's tables, the tool
	// policy and the session guard.
	env *wire.Env
	// v2026 answers 2026-07-28 requests; bridge those that go to an
	// upstream speaking only 2025-11-25; reverse the 2025-11-25 requests
	// that go to an upstream speaking only 2026-07-28.
	v2026   *v2026.Handler
	bridge  *bridge.Bridge
	reverse *v2025on2026.Bridge
	// upstream is what the route's calls learned of its upstream's health.
	upstream *upstream.State
}

// New returns a gateway for cfg on rt.
func New(cfg Config, rt *Runtime) (*Gateway, error) {
	if rt == nil || !rt.HasStore() {
		return nil, errors.New("taskproxy: a runtime with a store is required")
	}
	if cfg.DefaultTaskSupport == "" {
		cfg.DefaultTaskSupport = task.SupportOptional
	}
	if cfg.DefaultTTL <= 0 || cfg.MaxTTL <= 0 || cfg.DefaultTTL > cfg.MaxTTL {
		return nil, fmt.Errorf("taskproxy: need 0 < default ttl (%s) <= max ttl (%s)", cfg.DefaultTTL, cfg.MaxTTL)
	}
	if cfg.MaxBody <= 0 {
		return nil, errors.New("taskproxy: max body must be positive")
	}
	if cfg.Detach == nil {
		cfg.Detach = func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) }
	}
	if cfg.SweepInterval <= 0 {
		cfg.SweepInterval = time.Minute
	}
	switch {
	case cfg.LeaseTTL == 0:
		cfg.LeaseTTL = DefaultLeaseTTL
	case cfg.LeaseTTL < MinLeaseTTL || cfg.LeaseTTL > MaxLeaseTTL:
		return nil, fmt.Errorf("taskproxy: lease ttl %s out of bounds (%s to %s)", cfg.LeaseTTL, MinLeaseTTL, MaxLeaseTTL)
	}
	if cfg.ResumeWait <= 0 {
		cfg.ResumeWait = 2 * cfg.LeaseTTL
	}
	if cfg.MaxResultBytes <= 0 {
		cfg.MaxResultBytes = DefaultMaxResultBytes
	}
	env := &wire.Env{
		Policy: wire.Policy{
			TaskAfter: cfg.TaskAfter, DefaultTTL: cfg.DefaultTTL, MaxTTL: cfg.MaxTTL, PollInterval: cfg.PollInterval,
			MaxActivePerOwner: cfg.MaxActivePerOwner, MaxFinishedPerOwner: cfg.MaxFinishedPerOwner,
			MaxWatchedPerOwner: cfg.MaxWatchedPerOwner,
			ListTasks:          cfg.ListTasks, StrictRoutingHeaders: cfg.StrictRoutingHeaders, MaxResultBytes: cfg.MaxResultBytes,
			RouteName: cfg.Route, EntryURI: cfg.EntryURI, Rebinding: cfg.RebindingProtection.guard(), Detach: cfg.Detach, Peer: cfg.Peer,
			Stopping: cfg.Stopping, Observer: cfg.Observer,
			RunTimeout: cfg.RunTimeout, ToolRunTimeouts: cfg.ToolRunTimeouts,
		},
		Log: cfg.Logger, AuditLog: cfg.AuditLogger, Runtime: rt.Runtime,
		Limiter: gate.NewRateLimiter(cfg.RateLimit), Streams: rt.streams,
		Tools: wire.NewToolPolicy(cfg.Tools, cfg.DefaultTaskSupport, cfg.ListTasks),
	}
	if env.Log == nil {
		env.Log = zap.NewNop()
	}
	if env.AuditLog == nil {
		env.AuditLog = zap.NewNop()
	}
	env.Probes = wire.NewProbes(env.Log, cfg.Detach)
	upstreamState := upstream.NewState(env.Log)
	env.Probes.Found = func(v wire.Verdict) { upstreamState.Probed(v.Versions(), v.TasksExtension, time.Now()) }
	// What the upstream's initialize answers declare is kept under the
	// route's name, which every replica and the next process share.
	env.Tools.Caps.KeepIn(func() task.LearnedStore { return rt.Store }, cfg.Route, env.Log)
	// A call waiting for input is work in progress, as a task is: one
	// owner's are bounded by max_active_per_principal when it is set.
	maxParked := bridge.DefaultParkedPerOwner
	if cfg.MaxActivePerOwner > 0 {
		maxParked = cfg.MaxActivePerOwner
	}
	g := &Gateway{cfg: cfg, rt: rt, env: env, v2026: v2026.NewHandler(maxParked), bridge: bridge.New(env, maxParked), reverse: v2025on2026.New(env),
		upstream: upstreamState}
	env.Route = rt.NewRoute(runtime.RouteConfig{
		Name: cfg.Route, Detach: cfg.Detach, MaxResultBytes: cfg.MaxResultBytes, ResumeWait: cfg.ResumeWait, RequestBase: cfg.RequestBase,
		RetryOnRestart: cfg.RetryOnRestart, SweepInterval: cfg.SweepInterval, LeaseTTL: cfg.LeaseTTL, Observer: cfg.Observer,
		RunTimeout: cfg.RunTimeout, ToolRunTimeouts: cfg.ToolRunTimeouts,
		Logger: env.Log, AuditLogger: env.AuditLog, SessionLost: g.sessionLost, Upstream: upstreamState,
	})
	env.Sessions = wire.NewSessionGuard(rt.Runtime, rt.sessions, env.Log, env.Route)
	return g, nil
}

// ObserveUpstream records how a call of the next handler ended, for the
// route's upstream state in the runtime's health report: err nil reached
// the upstream, an error marked unreachable (upstream.Unreachable) did
// not, anything else says nothing of it. The first failure is logged as a
// warning. Call it from the next handler of every call, the gateway's own
// included.
func (g *Gateway) ObserveUpstream(err error) { g.upstream.Observe(err, time.Now()) }

// Start is called when g's configuration starts serving: it opens the
// runtime's store if no configuration did yet, makes g the gateway that
// background work and re-runs of its route follow, and, the first time,
// recovers the tasks a previous process left. A gateway that is only
// provisioned, never started, changes nothing. ServeHTTP starts the gateway
// too, should a request arrive before the start is announced.
func (g *Gateway) Start() error { return g.env.Route.Start() }

// Close is called when g's configuration is cleaned up (whether or not it
// started): another started gateway takes over background work.
func (g *Gateway) Close() {
	g.env.Route.Close()
	g.bridge.Close()
	g.v2026.Close()
}

// ServeBase takes r, the gateway's own request that Config.RequestBase
// made reach this route, as the base of the route's recovered tasks: they
// run through next, r's next handler. It answers nothing and sends nothing
// upstream; r is no client's.
func (g *Gateway) ServeBase(r *http.Request, next http.Handler) { g.env.Route.Served(r, next) }

// ServeHTTP handles one request to the MCP endpoint. What is not task
// business goes to next unchanged; the error of next is returned so that the
// caller's error handling applies.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	route := g.env.Route
	if !route.Started() {
		if err := route.Start(); err != nil {
			// The store does not open for now (another process holds
			// its directory, its database does not answer): answered as
			// a store that became unavailable is, under a reference the
			// log's warning carries.
			e := rpcerr.InternalError(g.env.Log, "task store not open", fmt.Errorf("%w: %w", task.ErrUnavailable, err))
			wire.WriteError(w, http.StatusServiceUnavailable, nil, e)
			return nil
		}
	}
	route.Served(r, next)
	who := task.CallerOf(r.Context())
	if !g.env.Sessions.Guard(w, r, who.Owner) {
		return nil
	}
	// Checked before the version decides the wire: a reverse-bridge
	// session speaks 2025-11-25 only, a request naming another version
	// (2026-07-28 included) is refused rather than served on another wire.
	if v2025on2026.Owns(r) && v2025on2026.RefuseVersion(w, r) {
		return nil
	}
	if r.Method != http.MethodPost {
		if taskID, id, ok := v2025.ParseResultResumeID(r.Header.Get("Last-Event-ID")); ok && r.Method == http.MethodGet {
			x := g.exchange(w, r, next, &jsonrpc.Message{JSONRPC: "2.0", ID: id, Method: "tasks/result"}, who)
			return v2025.ServeResumedResult(x, taskID)
		}
		if v2025on2026.Owns(r) { // a session the reverse bridge opened (the guard checked its owner)
			return g.reverse.ServeOther(g.exchange(w, r, next, &jsonrpc.Message{JSONRPC: "2.0"}, who))
		}
		if r.Method == http.MethodDelete && r.Header.Get(upstream.HeaderSessionID) != "" {
			return g.env.Sessions.ServeDelete(w, r, next)
		}
		return upstream.ServeNext(next, w, r)
	}
	// The message, the exchange that answers it and the body handed on,
	// in one allocation.
	post := new(postExchange)
	body, err := readBody(r, g.cfg.MaxBody, &post.body)
	if errors.Is(err, errBodyTooLarge) {
		wire.WriteError(w, http.StatusRequestEntityTooLarge, nil,
			jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "request body exceeds %d bytes", g.cfg.MaxBody))
		return nil
	}
	if err != nil {
		// An earlier handler's limit (Caddy's request_body max_size wraps
		// the body in http.MaxBytesReader) is met while reading a body sent
		// without Content-Length: as oversized as one over max_body, not
		// malformed JSON. (Only on an error: errors.As's target escapes,
		// one allocation per request.)
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			wire.WriteError(w, http.StatusRequestEntityTooLarge, nil,
				jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "request body exceeds %d bytes", mbe.Limit))
			return nil
		}
		wire.WriteError(w, http.StatusBadRequest, nil, jsonrpc.Errorf(jsonrpc.CodeParseError, "reading request body: %v", err))
		return nil
	}
	msg := &post.msg
	err = jsonrpc.ParseInto(msg, body)
	if err != nil {
		msg = nil // no envelope read: no id to echo
	}
	if err == nil {
		err = gate.CheckReadMembers(msg.Params, paramsRead)
	}
	if err == nil {
		err = gate.CheckBodyEncoding(r)
	}
	if err != nil {
		return g.refuseUnreadable(w, r, next, msg, err)
	}
	x := &post.x
	*x = wire.Exchange{Env: g.env, W: w, R: r, Next: next, Msg: msg, Owner: who.Owner, Caller: who, ParsedParams: msg.Params}
	era := detectEra(r, msg)
	defer traceMethod(x, era)()
	if era == task.Era2026 {
		switch {
		case !msg.IsRequest():
			return x.Pass()
		case g.bridge.Applies(x): // a 2025-11-25 upstream: the version bridge answers
			return g.bridge.Serve(x)
		}
		return g.v2026.Serve(x)
	}
	if g.reverse.Applies(x) { // a 2026-07-28-only upstream: the reverse version bridge answers
		return g.reverse.Serve(x)
	}
	switch {
	case msg.IsRequest():
		return v2025.Serve(x)
	case msg.IsNotification() && msg.Method == "notifications/cancelled":
		return v2025.ServeCancelled(x)
	case msg.IsResponse():
		if taskID, key, ok := jsonrpc.ParseInputID(msg.ID); ok {
			if !x.GuardOrigin() || x.Limited() {
				return nil
			}
			return v2025.ServeInputAnswer(x, taskID, key)
		}
	}
	return upstream.ServeNext(next, w, r)
}

// sessionLost is the route's hook for a task whose upstream session is
// gone: the version bridge's session, or the client's own 2025-11-25 one.
func (g *Gateway) sessionLost(t *task.Task, ev *upstream.Event) bool {
	return g.bridge.SessionLost(t, ev) || g.env.Sessions.Lost(t, ev)
}

// postExchange is a POST's message with the exchange that answers it and
// the body it hands on.
type postExchange struct {
	x    wire.Exchange
	msg  jsonrpc.Message
	body upstream.ReplayBody
}

// exchange is the request the protocol packages answer.
func (g *Gateway) exchange(w http.ResponseWriter, r *http.Request, next http.Handler, msg *jsonrpc.Message, who task.Caller) *wire.Exchange {
	return &wire.Exchange{Env: g.env, W: w, R: r, Next: next, Msg: msg, Owner: who.Owner, Caller: who}
}

// refuseUnreadable answers a POST body the gateway cannot read exactly as
// the upstream will (jsonrpc.ReadError): with HTTP 400 and the JSON-RPC error, the id
// echoed when the envelope itself was read. With PassUnreadable set, the body
// goes to the next handler instead, unread by the gateway.
func (g *Gateway) refuseUnreadable(w http.ResponseWriter, r *http.Request, next http.Handler, msg *jsonrpc.Message, err error) error {
	if g.cfg.PassUnreadable {
		return upstream.ServeNext(next, w, r)
	}
	var re *jsonrpc.ReadError
	if !errors.As(err, &re) {
		re = jsonrpc.ErrMalformedJSON
	}
	var id json.RawMessage
	if msg != nil {
		id = msg.ID
	}
	if ce := g.env.Log.Check(zap.DebugLevel, "refused a body the gateway cannot read as one JSON-RPC message"); ce != nil {
		ce.Write(zap.String("reason", re.Reason))
	}
	status := http.StatusBadRequest
	if re == gate.ErrForeignEncoding {
		status = http.StatusUnsupportedMediaType
	}
	wire.WriteError(w, status, id, re.RPCError())
	return nil
}

var errBodyTooLarge = errors.New("request body too large")

// bodyChunk is the size up to which a request body is read into a buffer
// of its declared length at once; larger ones grow as they arrive.
const bodyChunk = 64 << 10

// readBody reads the whole body, up to max bytes, and puts it back, in
// replay, so that the next handler can read it again.
func readBody(r *http.Request, max int64, replay *upstream.ReplayBody) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > max {
		return nil, errBodyTooLarge
	}
	var data []byte
	var err error
	if r.ContentLength > 0 && r.ContentLength <= bodyChunk { // the usual case: one exact read
		data = make([]byte, r.ContentLength)
		_, err = io.ReadFull(r.Body, data)
	} else {
		// Grown as the bytes arrive, not sized by what the client
		// declares: a client that declares max_body and trickles it in
		// would otherwise hold max_body of memory from its first byte.
		buf := bytes.NewBuffer(make([]byte, 0, bodyChunk))
		_, err = buf.ReadFrom(io.LimitReader(r.Body, max+1))
		data = buf.Bytes()
		if err == nil && r.ContentLength > 0 && int64(len(data)) < r.ContentLength {
			err = io.ErrUnexpectedEOF
		}
	}
	_ = r.Body.Close()
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, errBodyTooLarge
	}
	replay.Set(r, data)
	return data, nil
}

// detectEra tells the protocol generation of a request: 2026-07-28 carries
// its version in the header and in params._meta on every request.
func detectEra(r *http.Request, msg *jsonrpc.Message) task.Era {
	if v := gate.Header(r.Header, upstream.HeaderProtocolVersion); v >= string(task.Era2026) {
		return task.Era2026
	}
	// The literal key is the cheap test; a key written with escapes
	// ("\u0070rotocolVersion") is the same key to every JSON reader, so
	// params with a backslash take the scanner's decoding path too.
	if len(msg.Params) > 0 && (bytes.Contains(msg.Params, []byte(wire.MetaProtocolVersion)) || bytes.IndexByte(msg.Params, '\\') >= 0) {
		if meta, ok := jsonx.Get(msg.Params, "_meta"); ok {
			if _, ok := jsonx.Get(meta, wire.MetaProtocolVersion); ok {
				return task.Era2026
			}
		}
	}
	return task.Era2025
}
