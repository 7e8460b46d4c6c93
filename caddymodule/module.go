// Package caddymodule is the Caddy glue of caddy-mcp-tasks: it registers the
// http.handlers.mcp_tasks module and its Caddyfile directive, provisions the
// task store from a usage pool so that reloads share it, and hands requests to
// the taskproxy core.
package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// Defaults of the configuration.
const (
	DefaultTaskAfter          = time.Second
	DefaultTTL                = 15 * time.Minute
	DefaultMaxTTL             = 24 * time.Hour
	DefaultPollInterval       = time.Second
	DefaultMaxActive          = 100
	DefaultMaxBody      int64 = 4 << 20
	// maxMaxResult keeps a stored result, with the call's arguments and
	// inputs, under the store's record limit (32 MiB).
	maxMaxResult         int64 = 16 << 20
	DefaultRateLimit           = 50.0
	DefaultSweepInterval       = time.Minute
)

// Handler fronts MCP servers and gives them MCP tasks: slow tools/call
// requests become durable tasks, bound to the caller, that the gateway itself
// answers polling, input, cancellation and subscriptions for. Everything that
// is not task business passes to the next handler (normally reverse_proxy)
// unchanged.
type Handler struct {
	// StorageDir is the directory of the embedded task store (Badger):
	// shorthand for a storage of backend "badger" with this dir.
	// Configurations that name the same directory share one store.
	// Default: Caddy's data directory + "/mcp_tasks". Excludes Storage.
	StorageDir string `json:"storage_dir,omitempty"`

	// Storage is the task store backend: a module of the
	// http.handlers.mcp_tasks.storage namespace, named by its "backend"
	// key: "badger" (embedded, one Caddy) or "postgres" (shared by
	// replicas). Configurations whose stores are the same (same directory;
	// same DSN and schema) share one store across reloads.
	// Default: badger in StorageDir. Excludes StorageDir and SyncWrites.
	StorageRaw json.RawMessage `json:"storage,omitempty" caddy:"namespace=http.handlers.mcp_tasks.storage inline_key=backend"`

	// TaskAfter is how long a 2026-07-28 call that may become a task runs
	// before the gateway turns it into one. Default: 1s.
	TaskAfter caddy.Duration `json:"task_after,omitempty"`

	// DefaultTTL is how long a task is kept after creation when the client
	// asks for no ttl. Default: 15m.
	DefaultTTL caddy.Duration `json:"default_ttl,omitempty"`

	// MaxTTL caps the ttl a client may ask for. Default: 24h.
	MaxTTL caddy.Duration `json:"max_ttl,omitempty"`

	// PollInterval is the polling interval suggested to clients.
	// Default: 1s.
	PollInterval caddy.Duration `json:"poll_interval,omitempty"`

	// MaxActivePerPrincipal caps the tasks of one principal that are not
	// yet completed, failed or cancelled; a create over it gets JSON-RPC
	// error -32000. Default: 100 (also when 0 or absent); a negative value
	// removes the cap ("off" in the Caddyfile). Callers without
	// authentication are counted per client address.
	MaxActivePerPrincipal int `json:"max_active_per_principal,omitempty"`

	// MaxFinishedPerPrincipal caps the completed, failed and cancelled
	// tasks one principal keeps, each until its ttl ends: at the cap a
	// create gets JSON-RPC error -32000 (finished results are not deleted
	// before the ttl they were given). Default: 100000 (also when 0 or
	// absent); a negative value removes the cap ("off" in the Caddyfile).
	// Callers without authentication are counted per client address.
	MaxFinishedPerPrincipal int `json:"max_finished_per_principal,omitempty"`

	// MaxWatchedTasksPerPrincipal caps the task ids one principal's open
	// subscriptions/listen streams watch together (each listen watches at
	// most 1000); a listen that would pass it gets JSON-RPC error -32602
	// naming the limit. Every change of a watched task costs its streams a
	// read of each id they watch, so the cap bounds what one principal's
	// streams cost the server. Default: 2000 (also when 0 or absent).
	MaxWatchedTasksPerPrincipal int `json:"max_watched_tasks_per_principal,omitempty"`

	// DefaultTaskSupport is the task mode of tools that have no entry in
	// Tools: "forbidden", "optional" or "required". Default: "optional".
	DefaultTaskSupport string `json:"default_task_support,omitempty"`

	// MaxBody caps the size of request bodies in bytes; larger ones get
	// HTTP 413 with a JSON-RPC error. Default: 4 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	// PassUnreadable hands POST bodies the gateway cannot read as exactly
	// one JSON-RPC message (batches, bytes after the message, invalid JSON,
	// members of the envelope or of params the gateway reads named twice or
	// in another case) to the next handler unread, instead of refusing them
	// with HTTP 400 and a JSON-RPC error. The gateway is fail-closed by
	// default because MCP SDKs run such bodies: what they run then escapes
	// tool modes, quotas, tasks and the audit log. Default: false.
	PassUnreadable bool `json:"pass_unreadable,omitempty"`

	// MaxResult caps, in bytes, one message of an upstream's answer to a
	// task's call (its result, or one event of its stream). A task whose
	// upstream answers more fails with "result too large (N bytes, limit
	// M)", so that no record outgrows the store. At most 16 MiB.
	// Default: 8 MiB.
	MaxResult int64 `json:"max_result,omitempty"`

	// Tools sets the task policy of individual tools, by tool name.
	Tools map[string]*ToolPolicy `json:"tools,omitempty"`

	// RunTimeout bounds how long a task's tool may run: after it the
	// upstream call is cancelled (notifications/cancelled on 2025-11-25,
	// tasks/cancel for a task the upstream runs, the stream closed) and the
	// task fails with "run timeout: the tool ran longer than <limit>
	// (run_timeout)". Time the task spends in input_required, waiting for
	// the client's answer, does not count; the clock starts when a worker
	// starts the task (again after a restart). A tool's own run_timeout
	// takes precedence. Default: 0, no bound but the task's ttl (the
	// gateway cannot know how long a tool legitimately runs, and the ttl,
	// default_ttl and at most max_ttl, already ends every task).
	RunTimeout caddy.Duration `json:"run_timeout,omitempty"`

	// SyncWrites makes every task write wait for the disk (fsync), so an
	// accepted task survives a power loss, not only a crash of the
	// process. Concurrent writes share one fsync. Turning it off trades
	// that for speed: the last moments of writes before a power loss may
	// be lost. It applies when the storage directory is first opened: a
	// reload keeps the open store's setting (and logs a warning when it
	// differs). Default: true. Shorthand, with StorageDir, for the Badger backend's
	// own sync_writes.
	SyncWrites *bool `json:"sync_writes,omitempty"`

	// SweepInterval is how often expired tasks are deleted (and the
	// store's space reclaimed). A task lives until the first sweep after
	// its ttl. Default: 1m.
	SweepInterval caddy.Duration `json:"sweep_interval,omitempty"`

	// Auth identifies callers; tasks are bound to the caller's principal.
	// A CORS preflight passes unauthenticated, with the placeholder it
	// would set ({http.auth.user.id}) set to the empty string.
	// Without it every caller is one anonymous principal: any caller that
	// knows a task id reaches the task, and tasks/list is not offered.
	Auth *AuthConfig `json:"auth,omitempty"`

	// Principal, instead of Auth, names the caller with a placeholder set
	// by an authentication handler that runs before this one, such as
	// {http.auth.user.id} after forward_auth or basic_auth. It is only safe
	// when that handler runs first on every request to this route: the
	// gateway trusts whatever the placeholder says. A request for which it
	// is empty or not valid UTF-8 gets 401.
	Principal string `json:"principal,omitempty"`

	// AllowAuthBypass loads a layout in which some requests of the
	// gateway's path reach an answering handler without running this one,
	// and so without its Auth: an earlier handler or route that answers the
	// same requests (reverse_proxy written first in a route block, a handle
	// block put first by a global order line), or exact path matchers while
	// a later handler answers the paths below them. With Auth such a
	// layout is an error unless this is set; without Auth it is a warning.
	// Set it only when those requests are meant to pass unauthenticated.
	AllowAuthBypass bool `json:"allow_auth_bypass,omitempty"`

	// TrustDomain names who vouches for this route's callers. Owner keys
	// include it, so the same user name under two trust domains is two
	// principals that never see each other's tasks, even in one store.
	// With Auth, it replaces the keys (secrets, public keys, JWKS URL) in
	// the trust domain, which is otherwise derived from them: set it to
	// rotate keys without orphaning tasks. With Principal, the Caddyfile
	// adapter defaults it to the site's addresses. Routes that share it
	// (and the rest of the auth configuration) share principals.
	TrustDomain string `json:"trust_domain,omitempty"`

	// RateLimit caps task operations (tasks/get, tasks/result, tasks/list,
	// tasks/update, tasks/cancel, task subscriptions and input answers) and
	// initialize requests (each costs a stored session binding) per
	// principal per second, with bursts of twice that; over it a request
	// gets HTTP 429 with Retry-After. Default: 50 (also when 0 or absent);
	// a negative value removes the limit ("off" in the Caddyfile).
	// Anonymous callers are limited per client address: Caddy's client_ip,
	// which honours the server's trusted_proxies.
	RateLimit float64 `json:"rate_limit,omitempty"`

	// DNSRebindingProtection says when requests the gateway answers itself
	// (task methods, task creation, input answers) that arrived on a
	// loopback address must name a loopback Host and Origin, else get
	// HTTP 403: "auto" applies it to anonymous callers that did not come
	// through one of the server's trusted_proxies (a front proxy forwards
	// the public Host by design, and a rebinding attack carries no
	// credentials); "on" to every request on a loopback listener; "off"
	// never. Default: "auto".
	DNSRebindingProtection string `json:"dns_rebinding_protection,omitempty"`

	// RoutingHeaders says how 2026-07-28 routing headers are checked on
	// tasks/get, tasks/update and tasks/cancel: "lenient" takes a missing
	// Mcp-Name from params.taskId (FastMCP's tasks client omits it, and
	// FastMCP servers accept that); "strict" refuses it with HTTP 400 and
	// -32020, as the tasks extension's MUST says. A header that disagrees
	// with the body is refused either way. Default: "lenient".
	RoutingHeaders string `json:"routing_headers,omitempty"`

	// Drain is how long a process that stops (caddy stop, SIGTERM or
	// SIGINT; never a reload, which keeps tasks running) lets its running
	// tasks finish. It takes no new tasks meanwhile: a tools/call that
	// would become one gets HTTP 503 with Retry-After, which a load
	// balancer retries on another replica. Tasks still running at its end
	// are stopped and their leases released, so that another replica on
	// the same PostgreSQL store takes them over at once; on a single node
	// they fail, or run again (retry_on_restart), at the next start, as
	// after a crash. The process exits when the last task ends or the
	// drain ends. The drain is counted from the stop, shutdown_delay
	// included. Default: the http app's shutdown_delay plus grace_period
	// (the time Caddy gives open requests), or 5s when no grace_period is
	// set (Caddy then waits for requests for ever, a process manager does
	// not).
	Drain caddy.Duration `json:"drain,omitempty"`

	// Lease is how long a running task's lease lasts. The replica running
	// the task renews it every third of it; when a replica dies (a crash,
	// kill -9) another one on the same store takes its tasks over once the
	// lease has run out, within the lease plus a third of it. Shorter is
	// faster takeover for a store write per running task every third of
	// it, and more risk of taking over from a replica that was only slow
	// (a store that answered late for longer than the lease): its call's
	// outcome is then lost, or it runs twice (retry_on_restart). Between
	// 2s and 10m. Default: 30s. Routes on one store follow the
	// configuration that started last.
	Lease caddy.Duration `json:"lease,omitempty"`

	authn interface {
		authenticate(http.ResponseWriter, *http.Request) *http.Request
	}
	// drain is Drain, or the default it stands for.
	drain     time.Duration
	rt        *taskproxy.Runtime
	gw        *taskproxy.Gateway
	observe   func(error) // gw.ObserveUpstream, made once: a method value allocates
	poolKey   string      // the store's StorageBackend.StoreID, once acquired
	storeName string
	stopping  chan struct{}
	stop      func() // closes stopping, once
	logger    *zap.Logger
	server    *caddyhttp.Server // for the route identity's count, and the gateway's own requests (basereq.go)
	route     string            // the route identity
	// trustKey names the route's place, its store and position, and
	// trustDomain is the trust domain of its owner keys ("" anonymous):
	// recorded when the configuration starts serving (servedTrust).
	trustKey, trustDomain string
}

// ToolPolicy is the task policy of one tool.
type ToolPolicy struct {
	// TaskSupport is the tool's task mode. For 2025-11-25 clients it is
	// advertised as execution.taskSupport: "forbidden" refuses
	// task-augmented calls, "optional" allows them, "required" refuses
	// calls without params.task. For 2026-07-28 clients, "required" means
	// the call always becomes a task.
	TaskSupport string `json:"task_support,omitempty"`

	// RetryOnRestart declares the tool idempotent: a task of it whose call
	// was running when the gateway stopped or crashed is run again from
	// the stored request on restart, instead of failing.
	RetryOnRestart bool `json:"retry_on_restart,omitempty"`

	// RunTimeout is the tool's own run timeout, in place of the route's
	// (Handler.RunTimeout); a negative value means none for this tool
	// ("off" in the Caddyfile). Default: 0, the route's.
	RunTimeout caddy.Duration `json:"run_timeout,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.mcp_tasks",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Provision applies defaults, takes the shared task runtime for the storage
// directory from the usage pool, and builds the gateway. It opens nothing
// exclusively and recovers nothing: the store opens, and this
// configuration's settings take charge of background work, when Caddy
// reports the configuration started (or at its first request), so that
// caddy validate and a reload that fails have no side effects.
func (h *Handler) Provision(ctx caddy.Context) error {
	h.logger = ctx.Logger()
	if bypass := checkLayout(ctx); bypass != nil {
		if h.Auth != nil && !h.AllowAuthBypass && bypass.refused() {
			return fmt.Errorf("mcp_tasks: requests would reach the upstream unauthenticated: %w "+
				"(or, if they are meant to pass without auth, set allow_auth_bypass)", bypass)
		}
		h.logger.Warn(bypass.msg, bypass.fields...)
	}
	h.applyDefaults()
	h.drain = drainOf(ctx, h.Drain)
	backend, err := h.loadStorage(ctx)
	if err != nil {
		return fmt.Errorf("mcp_tasks: %w", err)
	}

	cfg, err := h.gatewayConfig()
	if err != nil {
		return err
	}
	if err := registerMetrics(ctx); err != nil {
		return fmt.Errorf("mcp_tasks: registering metrics: %w", err)
	}
	cfg.Observer = observer{}
	cfg.Route, h.server = routeID(ctx)
	h.stopping = make(chan struct{})
	h.stop = sync.OnceFunc(func() { close(h.stopping) })
	cfg.Stopping = h.stopping
	if err := h.watchStopping(ctx); err != nil {
		return err
	}

	h.warnIgnoredTrustDomain()
	switch {
	case h.Auth != nil && h.Principal != "":
		return errors.New("mcp_tasks: auth and principal exclude each other")
	case h.Auth != nil:
		if h.Auth.JWT == nil {
			return errors.New("mcp_tasks: auth needs a method (jwt)")
		}
		a, err := newAuthenticator(ctx, h.Auth.JWT, h.TrustDomain, h.logger)
		if err != nil {
			return fmt.Errorf("mcp_tasks: %w", err)
		}
		h.authn = a
		cfg.ListTasks = true // owners are real principals
	case h.Principal != "":
		if h.TrustDomain == "" {
			h.logger.Warn("mcp_tasks: principal without trust_domain: routes with the same principal placeholder and storage share principals; set trust_domain to tell apart routes with different authentication")
		}
		h.authn = newPlaceholderPrincipal(h.Principal, h.TrustDomain)
		cfg.ListTasks = true
	}

	// The route identity names who vouches for the route's callers too:
	// a re-run after a restart whose position now belongs to a route of
	// other callers (a site added before it, say) finds no route instead of
	// sending the task's arguments to that route's upstream.
	if d, ok := h.authn.(interface{ trustDomain() string }); ok {
		cfg.Route += "@" + d.trustDomain()
	}

	h.route = cfg.Route
	cfg.RequestBase = h.requestBase
	cfg.EntryURI = entryURI

	rt, key, err := acquireRuntime(backend, ctx.Logger().Named(backend.Backend()))
	if err != nil {
		return err
	}
	h.rt, h.poolKey, h.storeName = rt, key, backend.StoreName()
	h.warnTrustDomainChange(cfg.Route)
	if h.gw, err = taskproxy.New(cfg, rt); err != nil {
		return fmt.Errorf("mcp_tasks: %w", err)
	}
	h.observe = h.gw.ObserveUpstream
	return nil
}

func (h *Handler) applyDefaults() {
	if h.TaskAfter == 0 {
		h.TaskAfter = caddy.Duration(DefaultTaskAfter)
	}
	if h.DefaultTTL == 0 {
		h.DefaultTTL = caddy.Duration(DefaultTTL)
	}
	if h.MaxTTL == 0 {
		h.MaxTTL = caddy.Duration(DefaultMaxTTL)
	}
	if h.PollInterval == 0 {
		h.PollInterval = caddy.Duration(DefaultPollInterval)
	}
	if h.MaxActivePerPrincipal == 0 {
		h.MaxActivePerPrincipal = DefaultMaxActive
	}
	if h.MaxFinishedPerPrincipal == 0 {
		h.MaxFinishedPerPrincipal = task.DefaultMaxFinished
	}
	if h.DefaultTaskSupport == "" {
		h.DefaultTaskSupport = string(task.SupportOptional)
	}
	if h.MaxBody == 0 {
		h.MaxBody = DefaultMaxBody
	}
	if h.MaxResult == 0 {
		h.MaxResult = taskproxy.DefaultMaxResultBytes
	}
	if h.RateLimit == 0 {
		h.RateLimit = DefaultRateLimit
	}
	if h.SweepInterval == 0 {
		h.SweepInterval = caddy.Duration(DefaultSweepInterval)
	}
}

// gatewayConfig translates the module's fields into the core's config.
func (h *Handler) gatewayConfig() (taskproxy.Config, error) {
	def, err := task.ParseSupport(h.DefaultTaskSupport)
	if err != nil {
		return taskproxy.Config{}, fmt.Errorf("default_task_support: %w", err)
	}
	tools := make(map[string]task.Support, len(h.Tools))
	retry := map[string]bool{}
	runTimeouts := map[string]time.Duration{}
	for name, p := range h.Tools {
		if p != nil && p.RetryOnRestart {
			retry[name] = true
		}
		if p != nil && p.RunTimeout != 0 {
			runTimeouts[name] = max(time.Duration(p.RunTimeout), 0) // negative: none
		}
		if p == nil || p.TaskSupport == "" {
			tools[name] = def
			continue
		}
		m, err := task.ParseSupport(p.TaskSupport)
		if err != nil {
			return taskproxy.Config{}, fmt.Errorf("tool %s: %w", name, err)
		}
		tools[name] = m
	}
	rebinding, err := taskproxy.ParseRebindingProtection(h.DNSRebindingProtection)
	if err != nil {
		return taskproxy.Config{}, fmt.Errorf("dns_rebinding_protection: %w", err)
	}
	if err := checkLease(h.Lease); err != nil {
		return taskproxy.Config{}, err
	}
	maxActive := max(h.MaxActivePerPrincipal, 0)
	return taskproxy.Config{
		TaskAfter:            time.Duration(h.TaskAfter),
		DefaultTTL:           time.Duration(h.DefaultTTL),
		MaxTTL:               time.Duration(h.MaxTTL),
		PollInterval:         time.Duration(h.PollInterval),
		MaxActivePerOwner:    maxActive,
		MaxFinishedPerOwner:  max(h.MaxFinishedPerPrincipal, 0),
		MaxWatchedPerOwner:   max(h.MaxWatchedTasksPerPrincipal, 0),
		DefaultTaskSupport:   def,
		Tools:                tools,
		RetryOnRestart:       retry,
		RunTimeout:           time.Duration(h.RunTimeout),
		ToolRunTimeouts:      runTimeouts,
		SweepInterval:        time.Duration(h.SweepInterval),
		LeaseTTL:             time.Duration(h.Lease),
		MaxBody:              h.MaxBody,
		PassUnreadable:       h.PassUnreadable,
		StrictRoutingHeaders: h.RoutingHeaders == "strict",
		MaxResultBytes:       h.MaxResult,
		RateLimit:            max(h.RateLimit, 0),
		Detach:               detachRequest,
		Peer:                 peerOf,
		Logger:               h.logger,
		// Derived from the module's logger, so that Caddy's logging config
		// routes it: "include http.handlers.mcp_tasks.audit".
		AuditLogger:         h.logger.Named("audit"),
		RebindingProtection: rebinding,
	}, nil
}

// watchStopping closes h.stopping on Caddy's "stopping" event, which comes
// before the HTTP server waits for open requests: long-lived streams must
// end then, or a reload or stop would wait for them forever. It also starts
// the gateway on the "started" event, which only a configuration that runs
// gets (not caddy validate, not a reload that failed).
func (h *Handler) watchStopping(ctx caddy.Context) error {
	appIface, err := ctx.App("events")
	if err != nil {
		return fmt.Errorf("getting events app: %w", err)
	}
	events, ok := appIface.(*caddyevents.App)
	if !ok {
		return fmt.Errorf("events app has unexpected type %T", appIface)
	}
	if err := events.On("started", startedHandler{h}); err != nil {
		return fmt.Errorf("subscribing to the started event: %w", err)
	}
	return events.On("stopping", stoppingHandler{h})
}

type stoppingHandler struct{ h *Handler }

// Handle ends long-lived streams. When the process exits (caddy.Exiting:
// set before the stopping event of caddy stop or a signal, never for a
// reload), the runtime drains from now on: it takes no new tasks, and
// closing it lets running ones finish for the handler's drain.
func (s stoppingHandler) Handle(ctx context.Context, _ caddy.Event) error {
	exiting := caddy.Exiting()
	markStopping(exiting, s.h.drain)
	if exiting && s.h.rt != nil {
		s.h.rt.Drain.Begin()
	}
	s.h.stop()
	return nil
}

// drainOf is the drain of a handler: drain when set, else the time the
// http app gives open requests when the process exits (shutdown_delay and
// grace_period), or shutdownGrace when that is for ever.
func drainOf(ctx caddy.Context, drain caddy.Duration) time.Duration {
	if drain > 0 {
		return time.Duration(drain)
	}
	if app, err := ctx.AppIfConfigured("http"); err == nil {
		// The http app is provisioning this handler: its own fields are
		// read already.
		if ha, ok := app.(*caddyhttp.App); ok && ha.GracePeriod > 0 {
			return time.Duration(ha.ShutdownDelay + ha.GracePeriod)
		}
	}
	return shutdownGrace
}

type startedHandler struct{ h *Handler }

// Handle starts the gateway. A store that cannot be opened now is tried
// again at each request, which gets 503 meanwhile.
func (s startedHandler) Handle(ctx context.Context, _ caddy.Event) error {
	if s.h.gw == nil {
		return nil
	}
	if err := s.h.gw.Start(); err != nil {
		s.h.logger.Error("starting the task gateway", zap.String("store", s.h.storeName), zap.Error(err))
	}
	serveTrustDomain(s.h.trustKey, s.h.trustDomain)
	return nil
}

// warnTrustDomainChange warns when the route (its identity: position and
// trust domain) takes over a place on its store where a route of another
// trust domain serves now: the owner keys of its callers change, and the
// tasks and sessions they made are unreachable to them from now on.
func (h *Handler) warnTrustDomainChange(route string) {
	pos, domain, _ := strings.Cut(route, "@")
	h.trustKey, h.trustDomain = h.poolKey+" "+pos, domain
	old, ok := servedTrustDomain(h.trustKey)
	if !ok || old == domain {
		return
	}
	h.logger.Warn("the owner keys of this route's callers change with this configuration: the tasks and 2025-11-25 sessions "+
		"they created before are unreachable to them until their ttl ends; to rotate keys without this, set trust_domain (see \"The same principal\")",
		zap.String("route", pos), zap.String("store", h.storeName), zap.String("trust_domain_before", orDash(old)), zap.String("trust_domain", orDash(domain)))
}

// warnIgnoredTrustDomain warns of a trust_domain on a route without auth or
// principal: its callers are anonymous, and anonymous callers have no trust
// domain, so the route shares its tasks with every other anonymous route on
// the same store whatever trust_domain says.
func (h *Handler) warnIgnoredTrustDomain() {
	if h.Auth == nil && h.Principal == "" && h.TrustDomain != "" {
		h.logger.Warn("mcp_tasks: trust_domain without auth or principal has no effect: callers are anonymous, and anonymous routes on one store share their tasks",
			zap.String("trust_domain", h.TrustDomain))
	}
}

// Validate checks the configuration after Provision. Errors name the
// option as the Caddyfile and JSON spell it.
func (h *Handler) Validate() error {
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{
		{"task_after", h.TaskAfter}, {"default_ttl", h.DefaultTTL}, {"max_ttl", h.MaxTTL},
		{"poll_interval", h.PollInterval}, {"sweep_interval", h.SweepInterval}, {"run_timeout", h.RunTimeout},
		{"drain", h.Drain},
	} {
		if d.v < 0 {
			return fmt.Errorf("mcp_tasks: %s: must not be negative, got %s", d.name, time.Duration(d.v))
		}
	}
	if h.DefaultTTL > h.MaxTTL {
		return fmt.Errorf("mcp_tasks: default_ttl %s exceeds max_ttl %s", time.Duration(h.DefaultTTL), time.Duration(h.MaxTTL))
	}
	if err := checkLease(h.Lease); err != nil {
		return err
	}
	if h.MaxBody < 0 {
		return fmt.Errorf("mcp_tasks: max_body: must not be negative, got %d", h.MaxBody)
	}
	if h.MaxResult < 0 || h.MaxResult > maxMaxResult {
		return fmt.Errorf("mcp_tasks: max_result: must be between 1 byte and %d bytes (16MiB), got %d", int64(maxMaxResult), h.MaxResult)
	}
	if math.IsNaN(h.RateLimit) || math.IsInf(h.RateLimit, 0) {
		return fmt.Errorf("mcp_tasks: rate_limit: must be a finite number, got %v", h.RateLimit)
	}
	if _, err := taskproxy.ParseRebindingProtection(h.DNSRebindingProtection); err != nil {
		return fmt.Errorf("mcp_tasks: dns_rebinding_protection: %w", err)
	}
	if err := checkRoutingHeaders(h.RoutingHeaders); err != nil {
		return fmt.Errorf("mcp_tasks: routing_headers: %w", err)
	}
	return nil
}

// checkLease checks a lease against its bounds (0 is the default).
func checkLease(lease caddy.Duration) error {
	if l := time.Duration(lease); l != 0 && (l < taskproxy.MinLeaseTTL || l > taskproxy.MaxLeaseTTL) {
		return fmt.Errorf("mcp_tasks: lease: must be between %s and %s, got %s", taskproxy.MinLeaseTTL, taskproxy.MaxLeaseTTL, l)
	}
	return nil
}

// checkRoutingHeaders checks a routing_headers mode.
func checkRoutingHeaders(s string) error {
	switch s {
	case "", "lenient", "strict":
		return nil
	}
	return fmt.Errorf("unknown mode %q (want strict or lenient)", s)
}

// Cleanup releases this configuration's hold on the task store. It runs even
// when Provision failed, so it releases only what Provision took.
func (h *Handler) Cleanup() error {
	if h.stop != nil {
		h.stop()
	}
	if h.server != nil {
		forgetServer(h.server)
	}
	if h.gw != nil {
		h.gw.Close()
	}
	if h.poolKey == "" {
		return nil
	}
	_, err := runtimes.Delete(h.poolKey)
	h.poolKey = ""
	return err
}

// ServeHTTP hands the request to the gateway.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if br := baseRequestOf(r); br != nil { // the gateway's own (basereq.go)
		h.serveBase(w, r, nextHandler{next: next, observe: h.observe}, br)
		return nil
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		// A CORS preflight carries no credentials by design (Fetch spec);
		// it is not task business and not an auth failure. Other OPTIONS
		// requests are checked as any request. What passes unchecked is
		// only the preflight itself: no body, no session, no credentials,
		// so an upstream that reads any method as JSON-RPC gets nothing to
		// act on. Nor does it carry an identity: the placeholders auth jwt
		// sets expand to nothing rather than to their own text.
		r = r.Clone(r.Context())
		r.Body, r.ContentLength, r.GetBody = http.NoBody, 0, nil
		r.Header.Del("Content-Length")
		r.Header.Del("Authorization")
		r.Header.Del("Mcp-Session-Id")
		if _, ok := h.authn.(*authenticator); ok {
			withoutIdentity(r)
		}
		return next.ServeHTTP(w, r)
	}
	if h.authn != nil {
		if r = h.authn.authenticate(w, r); r == nil {
			return nil
		}
	}
	return h.gw.ServeHTTP(w, r, nextHandler{next: next, observe: h.observe})
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ taskproxy.ErrorHandler      = nextHandler{}
	_ caddyevents.Handler         = stoppingHandler{}
	_ caddyevents.Handler         = startedHandler{}
)
