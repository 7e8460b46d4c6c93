package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func init() {
	caddy.RegisterModule(AdminAPI{})
}

// AdminAPI is the admin.api.mcp_tasks module: routes on Caddy's admin
// endpoint for operators to see, inspect, cancel and delete the tasks of
// every principal, and a health check. The admin endpoint must stay private
// (Caddy's default, localhost:2019, or a unix socket): these routes see and
// cancel everyone's tasks.
//
//	GET  /mcp_tasks/stores                   the task stores in use
//	GET  /mcp_tasks/ui/                      the console, a page over these routes
//	GET  /mcp_tasks/tasks?status=&principal=&tenant=&route=&tool=&max_age=&min_age=&limit=&cursor=&detail=1&store=
//	GET  /mcp_tasks/tasks/{id}[?detail=1]
//	POST /mcp_tasks/tasks/{id}/cancel
//	DELETE /mcp_tasks/tasks/{id}             a finished task, before its ttl ends
//	DELETE /mcp_tasks/tasks?principal=&status=&tool=&store=   the finished tasks that match
//	GET  /mcp_tasks/health                   200 or 503
//	GET  /mcp_tasks/health/live              200 while the admin API answers
//	GET  /mcp_tasks/health/ready             200 when every store can take tasks, else 503
//	POST /mcp_tasks/backup[?store=]          a consistent backup of a Badger store, streamed
//
// A Badger store is named by its absolute storage directory, a PostgreSQL
// one by postgres:<schema>@<DSN with the password masked>; with several in
// use, listing needs ?store=, while lookups by id search them all.
type AdminAPI struct{}

// CaddyModule returns the Caddy module information.
func (AdminAPI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "admin.api.mcp_tasks",
		New: func() caddy.Module { return new(AdminAPI) },
	}
}

// Routes returns the admin routes, all under /mcp_tasks/.
func (a *AdminAPI) Routes() []caddy.AdminRoute {
	return []caddy.AdminRoute{{Pattern: "/mcp_tasks/", Handler: caddy.AdminHandlerFunc(a.serve)}}
}

// Listing limits.
const (
	defaultAdminLimit = 50
	maxAdminLimit     = 1000
)

// serve answers a route. Caddy's admin server logs every error a route
// returns at error level ("request error"); a refusal of the caller's
// request (an unknown task, a task already ended, a bad parameter, an
// operation the store does not offer) is no error of the server's, so 4xx
// and 501 answers are written here, in the admin API's error shape
// ({"error": "…"}), and only failures of the server (other 5xx) go back to
// Caddy to be logged.
func (a *AdminAPI) serve(w http.ResponseWriter, r *http.Request) error {
	err := a.route(w, r)
	var apiErr caddy.APIError
	if errors.As(err, &apiErr) && (apiErr.HTTPStatus >= 400 && apiErr.HTTPStatus < 500 || apiErr.HTTPStatus == http.StatusNotImplemented) {
		if apiErr.Message == "" && apiErr.Err != nil {
			apiErr.Message = apiErr.Err.Error()
		}
		return writeJSON(w, apiErr.HTTPStatus, apiErr)
	}
	return err
}

func (a *AdminAPI) route(w http.ResponseWriter, r *http.Request) error {
	path := strings.Trim(strings.TrimPrefix(r.URL.Path, "/mcp_tasks/"), "/")
	parts := strings.Split(path, "/")
	switch {
	case path == "health":
		return onlyMethod(r, http.MethodGet, func() error { return a.health(w, r) })
	case path == "health/live":
		return onlyMethod(r, http.MethodGet, func() error { return writeJSON(w, http.StatusOK, liveness{Live: true}) })
	case path == "health/ready":
		return onlyMethod(r, http.MethodGet, func() error { return a.ready(w, r) })
	case path == "stores":
		return onlyMethod(r, http.MethodGet, func() error { return a.stores(w) })
	case path == "tasks" && r.Method == http.MethodDelete:
		return a.deleteMany(w, r)
	case path == "tasks":
		if r.Method != http.MethodGet {
			return apiError(http.StatusMethodNotAllowed, "method %s not allowed, use GET or DELETE", r.Method)
		}
		return a.list(w, r)
	case len(parts) == 2 && parts[0] == "tasks" && parts[1] != "" && r.Method == http.MethodDelete:
		return a.delete(w, r, parts[1])
	case len(parts) == 2 && parts[0] == "tasks" && parts[1] != "":
		if r.Method != http.MethodGet {
			return apiError(http.StatusMethodNotAllowed, "method %s not allowed, use GET or DELETE", r.Method)
		}
		return a.show(w, r, parts[1])
	case len(parts) == 3 && parts[0] == "tasks" && parts[1] != "" && parts[2] == "cancel":
		return onlyMethod(r, http.MethodPost, func() error { return a.cancel(w, r, parts[1]) })
	case path == "backup":
		return onlyMethod(r, http.MethodPost, func() error { return a.backup(w, r) })
	case path == "ui" || strings.HasPrefix(path, "ui/"):
		return serveConsole(w, r)
	}
	return apiError(http.StatusNotFound, "no such mcp_tasks admin route: %s", r.URL.Path)
}

// onlyMethod runs fn for a request of method, and for HEAD where method is
// GET (a probe such as curl -I; the server sends no body to HEAD); other
// methods get 405.
func onlyMethod(r *http.Request, method string, fn func() error) error {
	if r.Method != method && (method != http.MethodGet || r.Method != http.MethodHead) {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("method %s not allowed, use %s", r.Method, method)}
	}
	return fn()
}

func apiError(status int, format string, args ...any) error {
	return caddy.APIError{HTTPStatus: status, Err: fmt.Errorf(format, args...)}
}

// namedRuntime is a runtime of the usage pool with its store's name.
type namedRuntime struct {
	name    string
	backend string
	rt      *taskproxy.Runtime
}

// pooledRuntimes returns the runtimes in use, by name.
func pooledRuntimes() []namedRuntime {
	var out []namedRuntime
	runtimes.Range(func(_, value any) bool {
		if p, ok := value.(pooledRuntime); ok {
			out = append(out, namedRuntime{name: p.name, backend: p.backend, rt: p.rt})
		}
		return true
	})
	slices.SortFunc(out, func(a, b namedRuntime) int { return strings.Compare(a.name, b.name) })
	return out
}

// selectRuntimes returns the runtime ?store= names, or all of them.
func selectRuntimes(r *http.Request) ([]namedRuntime, error) {
	all := pooledRuntimes()
	name := r.URL.Query().Get("store")
	if name == "" {
		return all, nil
	}
	for _, n := range all {
		if n.name == name {
			return []namedRuntime{n}, nil
		}
	}
	return nil, apiError(http.StatusNotFound, "no task store %q in use (stores: %s)", name, storeNames(all))
}

func storeNames(rts []namedRuntime) string {
	names := make([]string, len(rts))
	for i, n := range rts {
		names[i] = n.name
	}
	return strings.Join(names, ", ")
}

// oneRuntime is the store a listing pages through.
func oneRuntime(r *http.Request) (namedRuntime, error) {
	rts, err := selectRuntimes(r)
	switch {
	case err != nil:
		return namedRuntime{}, err
	case len(rts) == 0:
		return namedRuntime{}, apiError(http.StatusServiceUnavailable, "no mcp_tasks handler is configured")
	case len(rts) > 1:
		return namedRuntime{}, apiError(http.StatusBadRequest, "several task stores are in use: name one (?store= on the admin API, --store with caddy mcp-tasks): %s", storeNames(rts))
	}
	return rts[0], nil
}

// storeError maps an error of the operator access to an API error.
func storeError(err error, id string) error {
	switch {
	case errors.Is(err, task.ErrNotReady):
		return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: err}
	case errors.Is(err, task.ErrNoAdminAccess):
		return caddy.APIError{HTTPStatus: http.StatusNotImplemented, Err: err}
	case errors.Is(err, task.ErrNoDelete):
		return caddy.APIError{HTTPStatus: http.StatusNotImplemented, Err: err}
	case errors.Is(err, task.ErrNoBackup):
		return apiError(http.StatusNotImplemented, "%v: back this store up with its own tools (PostgreSQL: pg_dump of its schema)", err)
	case errors.Is(err, task.ErrInvalidCursor):
		return apiError(http.StatusBadRequest, "invalid cursor")
	case errors.Is(err, task.ErrExpired):
		return apiError(http.StatusGone, "task %s is gone: it was deleted at the end of its ttl or by an operator", id)
	case errors.Is(err, task.ErrNotFound):
		return apiError(http.StatusNotFound, "task %s not found", id)
	}
	return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("task store: %w", err)}
}

// adminTask is a task as the admin API shows it. Arguments, results and
// input contents only appear with ?detail=1.
type adminTask struct {
	ID            string    `json:"id"`
	Store         string    `json:"store"`
	Status        string    `json:"status"`
	StatusMessage string    `json:"status_message,omitempty"`
	Principal     string    `json:"principal,omitempty"`
	Tenant        string    `json:"tenant,omitempty"`
	Tool          string    `json:"tool"`
	Era           string    `json:"era"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	TTLMs         int64     `json:"ttl_ms"`
	Route         string    `json:"route,omitempty"`
	// QuotaKey is whom the task counts against for the per-principal
	// caps when that is not its principal: "ip:" and the client address
	// of a caller without authentication.
	QuotaKey string `json:"quota_key,omitempty"`
	// RunningHere: a worker of this Caddy process runs the task's call.
	RunningHere  bool      `json:"running_here"`
	LeaseHolder  string    `json:"lease_holder,omitempty"`
	LeaseExpires time.Time `json:"lease_expires,omitzero"`
	InputsOpen   int       `json:"inputs_open,omitempty"`
	IsError      bool      `json:"is_error,omitempty"`
	// History lists the status changes, oldest first, after the task's
	// creation (from "", to the status it was created with, at its
	// creation time); it is shown for one task (GET
	// /mcp_tasks/tasks/{id}) and in lists with ?detail=1.
	History []statusChange `json:"history,omitempty"`
	// UpstreamTaskID is the upstream's id of the task it runs for this
	// one (a task-aware upstream), followed by the gateway.
	UpstreamTaskID string `json:"upstream_task_id,omitempty"`
	// TraceID is the OpenTelemetry trace id of the request that created
	// the task, when it was traced (Caddy's tracing directive): the trace
	// that holds the task's mcp.task.* spans.
	TraceID string `json:"trace_id,omitempty"`

	Params json.RawMessage     `json:"params,omitempty"`
	Result json.RawMessage     `json:"result,omitempty"`
	Error  *jsonrpc.Error      `json:"error,omitempty"`
	Inputs []task.InputRequest `json:"inputs,omitempty"`
}

// statusChange is one entry of a task's history.
type statusChange struct {
	From    string    `json:"from"`
	To      string    `json:"to"`
	Message string    `json:"message,omitempty"`
	At      time.Time `json:"at"`
}

// viewHistory is t's history as the admin API shows it: its creation
// first, then its status changes. The record keeps only the changes; the
// status it was created with is where the first change started (the
// first is kept when the history is trimmed), or its status now.
func viewHistory(t *task.Task) []statusChange {
	initial := t.Status
	if len(t.History) > 0 {
		initial = t.History[0].From
	}
	out := make([]statusChange, 0, 1+len(t.History))
	out = append(out, statusChange{To: string(initial), At: t.CreatedAt})
	for _, c := range t.History {
		out = append(out, statusChange{From: string(c.From), To: string(c.To), Message: c.Message, At: c.At})
	}
	return out
}

func viewTask(store string, rt *taskproxy.Runtime, t *task.Task, detail bool) adminTask {
	v := adminTask{
		ID: t.ID, Store: store, Status: string(t.Status), StatusMessage: t.StatusMessage,
		Principal: t.Principal, Tenant: t.Tenant, QuotaKey: t.QuotaKey, Tool: t.Tool, Era: string(t.Era),
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, ExpiresAt: t.ExpiresAt(), TTLMs: t.TTL.Milliseconds(),
		Route: t.Route, RunningHere: rt.Running(t.ID), InputsOpen: len(t.Outstanding()), IsError: t.IsError,
		UpstreamTaskID: t.UpstreamTaskID,
	}
	v.TraceID, _ = t.TraceIDs()
	if !t.Status.Terminal() {
		v.LeaseHolder, v.LeaseExpires = t.Lease.Holder, t.Lease.Expires
	}
	if detail {
		v.Params, v.Result, v.Error, v.Inputs = t.Params, t.Result, t.Error, t.Inputs
		v.History = viewHistory(t)
	} else if t.Error != nil {
		// The error's code and message say why a task failed; its data
		// may carry what the upstream returned, so it is detail.
		v.Error = &jsonrpc.Error{Code: t.Error.Code, Message: t.Error.Message}
	}
	return v
}

func wantDetail(r *http.Request) bool {
	d := r.URL.Query().Get("detail")
	return d == "1" || d == "true"
}

type taskPage struct {
	Store      string      `json:"store"`
	Tasks      []adminTask `json:"tasks"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// listFilter reads a listing's filter: status, principal, tenant, route,
// tool, and the task's age, max_age (created less than this long ago) and
// min_age (more), as Go durations ("90s", "1h").
func listFilter(q url.Values, now time.Time) (task.TaskFilter, error) {
	filter := task.TaskFilter{Status: task.Status(q.Get("status")), Principal: q.Get("principal"),
		Tenant: q.Get("tenant"), Route: q.Get("route"), Tool: q.Get("tool")}
	switch filter.Status {
	case "", task.StatusWorking, task.StatusInputRequired, task.StatusCompleted, task.StatusFailed, task.StatusCancelled:
	default:
		return filter, apiError(http.StatusBadRequest, "status: want working, input_required, completed, failed or cancelled, got %q", filter.Status)
	}
	for _, bound := range []struct {
		param string
		into  *time.Time
	}{{"max_age", &filter.CreatedAfter}, {"min_age", &filter.CreatedBefore}} {
		v := q.Get(bound.param)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return filter, apiError(http.StatusBadRequest, "%s: want a positive duration such as 90s or 1h, got %q", bound.param, v)
		}
		*bound.into = now.Add(-d)
	}
	if !filter.CreatedAfter.IsZero() && !filter.CreatedBefore.IsZero() && !filter.CreatedBefore.After(filter.CreatedAfter) {
		return filter, apiError(http.StatusBadRequest, "min_age %s is not less than max_age %s: no task can match", q.Get("min_age"), q.Get("max_age"))
	}
	return filter, nil
}

func (a *AdminAPI) list(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	filter, err := listFilter(q, time.Now())
	if err != nil {
		return err
	}
	limit := defaultAdminLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAdminLimit {
			return apiError(http.StatusBadRequest, "limit: want 1 to %d, got %q", maxAdminLimit, v)
		}
		limit = n
	}
	nr, err := oneRuntime(r)
	if err != nil {
		return err
	}
	tasks, next, err := nr.rt.ListAll(r.Context(), filter, q.Get("cursor"), limit)
	if err != nil {
		return storeError(err, "")
	}
	page := taskPage{Store: nr.name, Tasks: make([]adminTask, 0, len(tasks)), NextCursor: next}
	detail := wantDetail(r)
	for _, t := range tasks {
		if detail { // the listing has summaries: the detail is read task by task
			whole, err := nr.rt.GetAny(r.Context(), t.ID)
			if errors.Is(err, task.ErrNotFound) {
				continue // swept since the listing
			}
			if err != nil {
				return storeError(err, t.ID)
			}
			t = whole
		}
		page.Tasks = append(page.Tasks, viewTask(nr.name, nr.rt, t, detail))
	}
	return writeJSON(w, http.StatusOK, page)
}

// findTask looks id up in the selected stores. A store that is not open is
// skipped while another may have the task.
func findTask(r *http.Request, id string) (namedRuntime, *task.Task, error) {
	rts, err := selectRuntimes(r)
	if err != nil {
		return namedRuntime{}, nil, err
	}
	if len(rts) == 0 {
		return namedRuntime{}, nil, apiError(http.StatusServiceUnavailable, "no mcp_tasks handler is configured")
	}
	var best error
	for _, nr := range rts {
		t, err := nr.rt.GetAny(r.Context(), id)
		if err == nil {
			return nr, t, nil
		}
		if best == nil || lookupRank(err) > lookupRank(best) {
			best = err
		}
	}
	return namedRuntime{}, nil, storeError(best, id)
}

// lookupRank orders the failures of a lookup in several stores by what they
// tell: expired, then a store that failed or is not open (it might have the
// task), then not found.
func lookupRank(err error) int {
	switch {
	case errors.Is(err, task.ErrExpired):
		return 2
	case errors.Is(err, task.ErrNotFound):
		return 0
	}
	return 1
}

func (a *AdminAPI) show(w http.ResponseWriter, r *http.Request, id string) error {
	nr, t, err := findTask(r, id)
	if err != nil {
		return err
	}
	v := viewTask(nr.name, nr.rt, t, wantDetail(r))
	v.History = viewHistory(t)
	return writeJSON(w, http.StatusOK, v)
}

func (a *AdminAPI) cancel(w http.ResponseWriter, r *http.Request, id string) error {
	nr, _, err := findTask(r, id)
	if err != nil {
		return err
	}
	t, err := nr.rt.CancelAsOperator(r.Context(), id, "admin API ("+r.RemoteAddr+")")
	if errors.Is(err, task.ErrTerminal) && t != nil {
		return apiError(http.StatusConflict, "task %s is already %s", id, t.Status)
	}
	if err != nil {
		return storeError(err, id)
	}
	v := viewTask(nr.name, nr.rt, t, false)
	v.History = viewHistory(t)
	return writeJSON(w, http.StatusOK, v)
}

// delete deletes a finished task before its ttl ends, so that it stops
// counting toward its owner's max_finished_per_principal; its owner then
// hears "expired" for it, as after the sweep. A task still running is
// refused with 409: cancel it first. It answers the task as it was.
func (a *AdminAPI) delete(w http.ResponseWriter, r *http.Request, id string) error {
	nr, _, err := findTask(r, id)
	if err != nil {
		return err
	}
	t, err := nr.rt.DeleteAsOperator(r.Context(), id, "admin API ("+r.RemoteAddr+")")
	if errors.Is(err, task.ErrNotFinished) && t != nil {
		return apiError(http.StatusConflict, "task %s is %s: cancel it before deleting it", id, t.Status)
	}
	if err != nil {
		return storeError(err, id)
	}
	v := viewTask(nr.name, nr.rt, t, false)
	v.History = viewHistory(t)
	return writeJSON(w, http.StatusOK, v)
}

// deleteBatch is how many tasks a bulk delete lists at a time.
const deleteBatch = 500

type deletedCount struct {
	Store   string `json:"store"`
	Deleted int    `json:"deleted"`
}

// deleteMany deletes the finished tasks of one store (or ?store=) that
// match the filter, as delete does each one: a principal's, say, to free
// its max_finished_per_principal at once. It needs a principal or a
// status, so that no request empties a store by mistake; a status must be
// a terminal one. Tasks that are not finished are left alone, as are
// those that ended or went while it ran. It answers how many it deleted.
func (a *AdminAPI) deleteMany(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	filter := task.TaskFilter{Status: task.Status(q.Get("status")), Principal: q.Get("principal"), Tool: q.Get("tool")}
	switch filter.Status {
	case "", task.StatusCompleted, task.StatusFailed, task.StatusCancelled:
	default:
		return apiError(http.StatusBadRequest, "status: want completed, failed or cancelled (only finished tasks are deleted), got %q", filter.Status)
	}
	if filter.Status == "" && filter.Principal == "" {
		return apiError(http.StatusBadRequest, "name a principal or a status of the finished tasks to delete")
	}
	nr, err := oneRuntime(r)
	if err != nil {
		return err
	}
	operator := "admin API (" + r.RemoteAddr + ")"
	n, cursor := 0, ""
	for {
		tasks, next, err := nr.rt.ListAll(r.Context(), filter, cursor, deleteBatch)
		if err != nil {
			return storeError(err, "")
		}
		for _, t := range tasks {
			if !t.Status.Terminal() {
				continue
			}
			_, err := nr.rt.DeleteAsOperator(r.Context(), t.ID, operator)
			switch {
			case err == nil:
				n++
			case errors.Is(err, task.ErrNotFound), errors.Is(err, task.ErrNotFinished):
				// gone meanwhile (swept), or not finished after all
			default:
				return storeError(err, t.ID)
			}
		}
		if cursor = next; cursor == "" {
			return writeJSON(w, http.StatusOK, deletedCount{Store: nr.name, Deleted: n})
		}
	}
}

// backup streams a consistent backup of the store (one, or ?store=) while
// it serves. An error before the first byte is an ordinary error answer;
// one after it aborts the connection, so that the client sees a broken
// transfer instead of a short backup that looks whole.
func (a *AdminAPI) backup(w http.ResponseWriter, r *http.Request) error {
	nr, err := oneRuntime(r)
	if err != nil {
		return err
	}
	out := &lazyStream{w: w, store: nr.name}
	if err := nr.rt.Backup(r.Context(), out); err != nil {
		if out.started {
			panic(http.ErrAbortHandler)
		}
		return storeError(err, "")
	}
	if !out.started { // an empty store still answers 200
		out.start()
	}
	return nil
}

// lazyStream writes the head of a backup answer with its first byte.
type lazyStream struct {
	w       http.ResponseWriter
	store   string
	started bool
}

func (l *lazyStream) start() {
	l.started = true
	l.w.Header().Set("Content-Type", "application/octet-stream")
	l.w.Header().Set("Mcp-Tasks-Store", l.store)
	l.w.WriteHeader(http.StatusOK)
}

func (l *lazyStream) Write(p []byte) (int, error) {
	if !l.started {
		l.start()
	}
	return l.w.Write(p)
}

type storeHealth struct {
	Store string `json:"store"`
	taskproxy.Health
}

type healthReport struct {
	Healthy bool          `json:"healthy"`
	Stores  []storeHealth `json:"stores"`
}

// health answers 200 when every selected store is open, reachable and done
// with recovery, else 503, with each store's state either way.
func (a *AdminAPI) health(w http.ResponseWriter, r *http.Request) error {
	rts, err := selectRuntimes(r)
	if err != nil {
		return err
	}
	rep := healthReport{Healthy: len(rts) > 0, Stores: make([]storeHealth, 0, len(rts))}
	for _, nr := range rts {
		h := nr.rt.Health(r.Context())
		rep.Healthy = rep.Healthy && h.Healthy()
		rep.Stores = append(rep.Stores, storeHealth{Store: nr.name, Health: h})
	}
	status := http.StatusOK
	if !rep.Healthy {
		status = http.StatusServiceUnavailable
	}
	return writeJSON(w, status, rep)
}

// liveness is the answer of the liveness probe.
type liveness struct {
	Live bool `json:"live"`
}

// readiness is the answer of the readiness probe: whether the process can
// take tasks, and if not, why, one line per store that cannot.
type readiness struct {
	Ready    bool     `json:"ready"`
	Draining bool     `json:"draining,omitempty"`
	Why      []string `json:"why,omitempty"`
}

// ready answers 200 when every store in use can take tasks (open,
// reachable, writable, done with recovery) and the process is not
// draining, else 503. It is health for a service manager or an
// orchestrator: every store at once, a small answer, no upstream state.
func (a *AdminAPI) ready(w http.ResponseWriter, r *http.Request) error {
	rep := readinessNow(r.Context())
	status := http.StatusOK
	if !rep.Ready {
		status = http.StatusServiceUnavailable
	}
	return writeJSON(w, status, rep)
}

// readinessNow checks every store in use once.
func readinessNow(ctx context.Context) readiness {
	rts := pooledRuntimes()
	rep := readiness{Ready: len(rts) > 0}
	if len(rts) == 0 {
		rep.Why = append(rep.Why, "no mcp_tasks handler is configured")
	}
	for _, nr := range rts {
		h := nr.rt.Health(ctx)
		if h.Healthy() {
			continue
		}
		rep.Ready = false
		rep.Draining = rep.Draining || h.Draining
		rep.Why = append(rep.Why, nr.name+": "+notReady(h))
	}
	return rep
}

// notReady says why a store that is not healthy cannot take tasks.
func notReady(h taskproxy.Health) string {
	switch {
	case h.Draining:
		return "draining: the process stops and takes no new tasks"
	case !h.Open:
		return "not open: " + h.Error
	case !h.Reachable:
		return "unreachable: " + h.Error
	case !h.Writable:
		return "not writable: " + h.Error
	case !h.Recovered:
		return "recovering the tasks a previous process left running"
	}
	return "unhealthy"
}

type storeInfo struct {
	Store   string `json:"store"`
	Backend string `json:"backend"`
	Open    bool   `json:"open"`
	Workers int    `json:"workers"`
	// PlainCalls counts the plain calls (of 2026-07-28 clients, and of
	// 2025-11-25 clients through the reverse version bridge) waiting on a
	// task the upstream runs for them: no tasks of the gateway's, so in no listing,
	// but each holds one of its caller's max_active_per_principal.
	PlainCalls int `json:"plain_calls"`
}

func (a *AdminAPI) stores(w http.ResponseWriter) error {
	out := []storeInfo{}
	for _, nr := range pooledRuntimes() {
		out = append(out, storeInfo{Store: nr.name, Backend: nr.backend, Open: nr.rt.Ready(), Workers: nr.rt.RunningWorkers(),
			PlainCalls: nr.rt.Inline.Total()})
	}
	return writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: fmt.Errorf("encoding the answer: %w", err)}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(append(body, '\n'))
	return err
}

// Interface guard
var _ caddy.AdminRouter = (*AdminAPI)(nil)
