package taskruntime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Defaults of [Options].
const (
	DefaultTTL          = 10 * time.Minute
	DefaultPollInterval = 100 * time.Millisecond
	DefaultSweep        = time.Second
	// maxBody bounds a request body.
	maxBody = 1 << 20
)

// Options configures a [Server].
type Options struct {
	// Logger receives the runtime's log output. Nil discards it.
	Logger *slog.Logger

	// StateFile, when set, is where tasks are kept (rewritten on every
	// change, atomically) and read back by [New], so that a runtime
	// restarted on the same file still answers for its tasks and resumes
	// their work. Empty keeps tasks in memory only.
	StateFile string

	// TTL is every task's ttlMs. Zero means [DefaultTTL]; negative means
	// unlimited (ttlMs null).
	TTL time.Duration

	// PollInterval is every task's pollIntervalMs. Zero means
	// [DefaultPollInterval].
	PollInterval time.Duration

	// IntegralFloats writes integers as integral floats, as runtimes that
	// keep them as floats do (fastmcp-tasks): ttlMs 900000.0,
	// pollIntervalMs 5000.0, progress 1.0 of 3.0, in every answer and
	// event (see floats.go).
	IntegralFloats bool

	// PickupDelay is how long a new task waits, working, before its work
	// starts: a queue worker that picks the task up a little later, as
	// Docket's do (~50 ms). Zero starts the work at once.
	PickupDelay time.Duration

	// BindHeader names the request header whose value a task is bound to:
	// only requests with the same value see the task (the extension
	// requires an authorization check on every task request). Empty means
	// "Authorization"; "-" binds nothing. Requests without the header are
	// one anonymous caller.
	BindHeader string

	// AllowedOrigins lists Origin header values accepted besides the
	// request's own host; any other Origin gets 403.
	AllowedOrigins []string

	// StateKey signs requestState of plain calls. Nil means a random key
	// per process.
	StateKey []byte

	// Now is the clock of timestamps and expiry. Nil means time.Now.
	Now func() time.Time

	// SweepInterval is how often expired tasks are swept in the
	// background. Zero means [DefaultSweep]; negative means only when a
	// request arrives (tests with their own clock use that).
	SweepInterval time.Duration

	// Modes sets the task mode of tools by name, in place of their own
	// (ToolInterview required, say: a task-only tool that asks for input).
	Modes map[string]TaskMode

	// AcceptV2025Initialize makes the runtime answer a 2025-11-25
	// initialize with an InitializeResult (no session) instead of -32022,
	// while server/discover still lists only 2026-07-28: a discovery that
	// undersells, as FastMCP 4's does. Only the handshake is answered;
	// every other request must be 2026-07-28 as before. Requests
	// ("initialize") counts the initializes answered.
	AcceptV2025Initialize bool

	// V2025Tasks makes the runtime a 2025-11-25 server instead, one that
	// runs tools as tasks of its own when a tools/call carries
	// params.task, as the TypeScript SDK's server does (see v2025.go): it
	// speaks no 2026-07-28 at all.
	V2025Tasks bool
}

// Server is the task runtime. It implements [http.Handler] for the MCP
// endpoint; [Server.ControlHandler] serves the observer API over HTTP.
type Server struct {
	logger       *slog.Logger
	stateFile    string
	ttl          time.Duration
	pollInterval time.Duration
	floats       bool          // Options.IntegralFloats
	pickupDelay  time.Duration // Options.PickupDelay
	bindHeader   string
	origins      []string
	stateKey     []byte
	now          func() time.Time
	tools        map[string]*toolSpec
	toolOrder    []*toolSpec
	// acceptV2025Init: Options.AcceptV2025Initialize.
	acceptV2025Init bool
	// v2025Tasks: Options.V2025Tasks.
	v2025Tasks bool

	root  context.Context
	close context.CancelCauseFunc
	wg    sync.WaitGroup

	mu      sync.Mutex
	tasks   map[string]*record
	order   []string // task ids in creation order
	expired map[string]tombstone
	stops   map[string]context.CancelCauseFunc
	changed chan struct{} // closed and replaced on every change
	holds   map[string]int
	// answerHolds are the tools whose CreateTaskResult is held back
	// (HoldAnswers): each channel closes at ReleaseAnswers.
	answerHolds map[string]chan struct{}
	obs         counters
}

// New returns a running Server. With a state file it loads the tasks kept
// there and resumes the unfinished ones.
func New(opts Options) (*Server, error) {
	s := &Server{
		logger: opts.Logger, stateFile: opts.StateFile, ttl: opts.TTL, pollInterval: opts.PollInterval,
		bindHeader: opts.BindHeader, origins: opts.AllowedOrigins, stateKey: opts.StateKey, now: opts.Now,
		tools: map[string]*toolSpec{}, tasks: map[string]*record{}, expired: map[string]tombstone{},
		stops: map[string]context.CancelCauseFunc{}, changed: make(chan struct{}), holds: map[string]int{},
		acceptV2025Init: opts.AcceptV2025Initialize, answerHolds: map[string]chan struct{}{}, v2025Tasks: opts.V2025Tasks,
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.ttl == 0 {
		s.ttl = DefaultTTL
	}
	if s.pollInterval <= 0 {
		s.pollInterval = DefaultPollInterval
	}
	s.floats, s.pickupDelay = opts.IntegralFloats, opts.PickupDelay
	switch s.bindHeader {
	case "":
		s.bindHeader = "Authorization"
	case "-":
		s.bindHeader = ""
	}
	if len(s.stateKey) == 0 {
		s.stateKey = make([]byte, 32)
		rand.Read(s.stateKey) // crypto/rand.Read never returns an error.
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.obs.init()
	for _, t := range toolSpecs() {
		if m, ok := opts.Modes[t.name]; ok {
			t.mode = m
		}
		s.tools[t.name] = t
		s.toolOrder = append(s.toolOrder, t)
	}
	if err := s.load(); err != nil {
		return nil, err
	}
	s.root, s.close = context.WithCancelCause(context.Background())
	s.mu.Lock()
	for _, id := range s.order {
		if t := s.tasks[id]; !t.Status.Terminal() {
			s.start(t)
		}
	}
	s.mu.Unlock()
	if opts.SweepInterval >= 0 {
		every := opts.SweepInterval
		if every == 0 {
			every = DefaultSweep
		}
		s.wg.Add(1)
		go s.sweeper(every)
	}
	return s, nil
}

func (s *Server) sweeper(every time.Duration) {
	defer s.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.mu.Lock()
			s.sweepLocked()
			s.mu.Unlock()
		case <-s.root.Done():
			return
		}
	}
}

// Close stops all work and waits for it. Unfinished tasks stay as they are
// in the state file, to resume when a Server is made on it again.
func (s *Server) Close() error {
	s.close(errClosing)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.saveLocked(); err != nil {
		return fmt.Errorf("closing task runtime: %w", err)
	}
	return nil
}

// methods are the requests the runtime answers. tasks/result and
// tasks/list are not among them: the extension removed both (-32601).
var methods = map[string]func(*Server, *exchange) (any, *rpcError){
	"server/discover": (*Server).discover,
	"tools/list":      (*Server).listTools,
	"tools/call":      (*Server).callTool,
	"tasks/get":       (*Server).getTask,
	"tasks/update":    (*Server).updateTask,
	"tasks/cancel":    (*Server).cancelTask,
	// subscriptions/listen is a core pattern; only the extension's taskIds
	// filter is served.
	"subscriptions/listen": (*Server).listen,
}

// exchange is one request being answered.
type exchange struct {
	w     http.ResponseWriter
	r     *http.Request
	msg   *message
	meta  requestMeta
	owner string
	// answered is set by a handler that wrote the response itself (an SSE
	// answer).
	answered bool
}

// ServeHTTP answers one POST on the MCP endpoint. Only 2026-07-28 is
// spoken: GET and DELETE (the 2025-11-25 stream and session end) get 405,
// an initialize gets -32022, Mcp-Session-Id and Last-Event-ID are ignored.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.floats {
		w = floatWriter{w}
	}
	if s.v2025Tasks {
		s.serveV2025(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "the 2026-07-28 MCP endpoint accepts POST only", http.StatusMethodNotAllowed)
		return
	}
	if !checkOrigin(r, s.origins) {
		writeError(w, nil, protocolError(http.StatusForbidden, CodeInvalidRequest, "Origin %q is not allowed", r.Header.Get("Origin")))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
		writeError(w, nil, protocolError(http.StatusBadRequest, CodeParseError, "reading request body: too large or unreadable"))
		return
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		writeError(w, nil, s.count(protocolError(http.StatusBadRequest, CodeInvalidRequest, "the body must be one JSON-RPC message, not a batch")))
		return
	}
	var msg message
	if err := json.Unmarshal(body, &msg); err != nil {
		writeError(w, nil, s.count(protocolError(http.StatusBadRequest, CodeParseError, "Parse error: %v", err)))
		return
	}
	switch {
	case msg.JSONRPC != "2.0":
		writeError(w, nil, s.count(protocolError(http.StatusBadRequest, CodeInvalidRequest, `jsonrpc must be "2.0"`)))
		return
	case msg.Method == "" && msg.ID != nil:
		writeError(w, nil, s.count(protocolError(http.StatusBadRequest, CodeInvalidRequest, "clients must not send JSON-RPC responses")))
		return
	case msg.ID == nil:
		// A notification: accepted and ignored. 2026-07-28 defines none
		// from client to server over HTTP, nor headers for them.
		w.WriteHeader(http.StatusAccepted)
		return
	case !validID(msg.ID):
		writeError(w, nil, s.count(protocolError(http.StatusBadRequest, CodeInvalidRequest, "id must be a string or an integer")))
		return
	}
	if msg.Method == "initialize" {
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(msg.Params, &p) // the requested version is echoed when it can be read
		if s.acceptV2025Init && p.ProtocolVersion == v2025Version {
			s.mu.Lock()
			s.obs.requests[msg.Method]++
			s.mu.Unlock()
			writeResult(w, msg.ID, v2025InitializeResult())
			return
		}
		e := protocolError(http.StatusBadRequest, CodeUnsupportedVersion, unsupportedVersionMessage)
		e.Data = map[string]any{"supported": []string{ProtocolVersion}, "requested": p.ProtocolVersion}
		writeError(w, msg.ID, s.count(e))
		return
	}
	meta, rerr := checkRequest(r, &msg, func(m string) bool { _, ok := methods[m]; return ok })
	if rerr != nil {
		writeError(w, msg.ID, s.count(rerr))
		return
	}
	x := &exchange{w: w, r: r, msg: &msg, meta: meta, owner: s.ownerOf(r)}
	s.mu.Lock()
	s.sweepLocked()
	s.obs.requests[msg.Method]++
	s.mu.Unlock()
	result, rerr := methods[msg.Method](s, x)
	switch {
	case x.answered:
	case rerr != nil:
		writeError(w, msg.ID, s.count(rerr))
	default:
		writeResult(w, msg.ID, result)
	}
}

// serverInfo is stamped on every result.
func serverInfo() map[string]any {
	return map[string]any{metaServerInfo: map[string]any{"name": "caddy-mcp-tasks-taskruntime", "version": "0.1.0"}}
}

func (s *Server) discover(*exchange) (any, *rpcError) {
	return map[string]any{
		"resultType":        "complete",
		"supportedVersions": []string{ProtocolVersion},
		"capabilities": map[string]any{
			"tools":      map[string]any{},
			"extensions": map[string]any{ExtensionID: map[string]any{}},
		},
		"instructions": "A 2026-07-28 task runtime fixture: tools steps (task required), interview and fail_job (optional), echo (forbidden).",
		"ttlMs":        60_000,
		"cacheScope":   "public",
		"_meta":        serverInfo(),
	}, nil
}

// v2025Version is the one earlier version whose initialize the runtime
// answers, with Options.AcceptV2025Initialize.
const v2025Version = "2025-11-25"

// v2025InitializeResult answers a 2025-11-25 initialize: the same tools
// capability as server/discover, no session.
func v2025InitializeResult() map[string]any {
	return map[string]any{
		"protocolVersion": v2025Version,
		"capabilities":    map[string]any{"tools": map[string]any{}},
		"serverInfo":      map[string]any{"name": "caddy-mcp-tasks-taskruntime", "version": "0.1.0"},
	}
}

func (s *Server) listTools(*exchange) (any, *rpcError) {
	tools := make([]any, 0, len(s.toolOrder))
	for _, t := range s.toolOrder {
		tools = append(tools, t.listing())
	}
	return map[string]any{"resultType": "complete", "tools": tools, "ttlMs": 60_000, "cacheScope": "public", "_meta": serverInfo()}, nil
}
