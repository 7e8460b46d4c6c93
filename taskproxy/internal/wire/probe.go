package wire

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What the gateway learns of an upstream endpoint by asking it itself:
// one server/discover, sent as a 2026-07-28 client that declares the tasks
// extension, tells whether the upstream speaks 2026-07-28 there (else the
// version bridge answers its 2026-07-28 clients) and whether it runs the
// tasks extension itself (else the gateway makes the tasks). 2025-11-25
// traffic never waits for it.

// probeTimeout bounds one probe.
const probeTimeout = 10 * time.Second

// Verdict is what a probe learned of one endpoint.
type Verdict struct {
	// V2025 says the upstream does not speak 2026-07-28 there.
	V2025 bool
	// TasksExtension says its server/discover lists the tasks extension:
	// it runs 2026-07-28 tasks itself.
	TasksExtension bool
	// V2026Only says the upstream speaks 2026-07-28 and not 2025-11-25
	// there: its server/discover lists supportedVersions without
	// 2025-11-25. 2025-11-25 clients are then served by the reverse
	// bridge (internal/bridge/v2025on2026).
	V2026Only bool
	// at is when the probe answered.
	at time.Time
}

// Probes keeps the verdicts of one configuration's endpoints: at most
// MaxProbeVerdicts, the least recently used going first, each for
// ProbeTTL. One probe of an endpoint with one caller's credentials runs at
// a time; the callers with the same credentials wait for its answer.
type Probes struct {
	log      *zap.Logger
	detach   func(*http.Request) *http.Request
	verdicts *lru.Cache[string, Verdict]
	// mu orders the changes to verdicts, each followed by a new kept.
	mu sync.Mutex
	// kept is what verdicts holds, as of its last change, for Cached to
	// read without a lock: every request a version bridge may answer
	// reads it, and it changes about once per probe.
	kept   atomic.Pointer[map[string]Verdict]
	flight singleflight.Group
	// probing holds the endpoints whose probe runs (ConfirmV2025 leaves
	// them to it).
	probing sync.Map
	// Found, when set, is told every verdict a probe keeps.
	Found func(Verdict)
}

// Versions are the protocol versions the verdict found the upstream
// speaking.
func (v Verdict) Versions() []string {
	var out []string
	if !v.V2025 {
		out = append(out, string(task.Era2026))
	}
	if !v.V2026Only {
		out = append(out, string(task.Era2025))
	}
	return out
}

// NewProbes returns an empty table. detach copies a request for the
// probe, which must not write to the client request's handler state.
func NewProbes(log *zap.Logger, detach func(*http.Request) *http.Request) *Probes {
	verdicts, _ := lru.New[string, Verdict](MaxProbeVerdicts) // only a size below 1 fails
	return &Probes{log: log, detach: detach, verdicts: verdicts}
}

// probeResult is one probe's answer: known is false when the upstream
// could not be asked; notFound reports a 404 or 405, which any path the
// upstream does not serve answers.
type probeResult struct {
	v               Verdict
	known, notFound bool
}

// kept reports whether the result is kept as the endpoint's verdict: not
// when the probe learned nothing, nor for a 2025-only answer of 404 or 405
// (until Confirm: a path the upstream does not serve says as much).
func (res probeResult) kept() bool { return res.known && !(res.v.V2025 && res.notFound) }

// Verdict returns the kept verdict of r's endpoint, probing when there is
// none or it is stale; known is false when the probe learned nothing (the
// upstream is down, or refuses the caller) or the caller left meanwhile.
// A 404 or 405 answers V2025 without being kept. The probe carries r's
// Authorization and runs within r's context; callers of an endpoint with
// the same Authorization wait for one probe, and a probe that learned
// nothing (its credentials, or none, refused) is no other caller's answer.
func (p *Probes) Verdict(r *http.Request, next http.Handler) (v Verdict, known bool) {
	endpoint := ProbeKey(r)
	if v, ok := p.fresh(endpoint); ok {
		return v, true
	}
	// The probe's request is made here, on the caller's goroutine: the
	// caller goes on with r (editing its headers) when it stops waiting,
	// while the probe may still run.
	req := p.request(r)
	flight := endpoint + "\x00" + gate.HashHex(strings.Join(r.Header.Values("Authorization"), "\n"))
	ch := p.flight.DoChan(flight, func() (any, error) {
		return p.run(endpoint, req, next), nil
	})
	select {
	case out := <-ch:
		res := out.Val.(probeResult)
		return res.v, res.known
	case <-r.Context().Done():
		return Verdict{}, false
	}
}

// run probes endpoint with req and keeps what it learned. A panic of the
// probe (of the detach it was given, say) is logged and learns nothing:
// it would otherwise end the process, on the flight's goroutine.
func (p *Probes) run(endpoint string, req *http.Request, next http.Handler) (res probeResult) {
	p.probing.Store(endpoint, true)
	defer p.probing.Delete(endpoint)
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("probing the upstream's protocol panicked", zap.Any("panic", v), zap.String("endpoint", endpoint))
			res = probeResult{}
		}
	}()
	if v, ok := p.fresh(endpoint); ok { // a probe that ended just now
		return probeResult{v: v, known: true}
	}
	res = p.ask(req, next)
	if res.kept() {
		prev, had := p.verdicts.Peek(endpoint)
		p.change(func() { p.verdicts.Add(endpoint, res.v) })
		if p.Found != nil {
			p.Found(res.v)
		}
		if !had || prev.V2025 != res.v.V2025 || prev.TasksExtension != res.v.TasksExtension || prev.V2026Only != res.v.V2026Only {
			p.log.Info("upstream protocol probed", zap.String("endpoint", endpoint), zap.Bool("speaks_2026_07_28", !res.v.V2025),
				zap.Bool("speaks_2025_11_25", !res.v.V2026Only), zap.Bool("version_bridge", res.v.V2025),
				zap.Bool("reverse_version_bridge", res.v.V2026Only), zap.Bool("runs_tasks_extension", res.v.TasksExtension))
		}
	}
	return res
}

// fresh returns endpoint's verdict while it is younger than ProbeTTL.
func (p *Probes) fresh(endpoint string) (Verdict, bool) {
	v, ok := p.verdicts.Get(endpoint)
	if !ok {
		return Verdict{}, false
	}
	if time.Since(v.at) >= ProbeTTL {
		p.change(func() {
			if v, ok := p.verdicts.Peek(endpoint); ok && time.Since(v.at) >= ProbeTTL { // not one kept meanwhile
				p.verdicts.Remove(endpoint)
			}
		})
		return Verdict{}, false
	}
	return v, true
}

// Cached returns the kept verdict of r's endpoint while it is fresh,
// without probing: for requests that must not wait for a probe. It reads
// the verdicts as of their last change, without a lock, and neither
// marks the verdict used (the probes and Verdict's callers order what the
// table evicts first) nor drops a stale one (the next probe of its
// endpoint does).
func (p *Probes) Cached(r *http.Request) (Verdict, bool) {
	if kept := p.kept.Load(); kept != nil {
		if v, ok := (*kept)[ProbeKey(r)]; ok && time.Since(v.at) < ProbeTTL {
			return v, true
		}
	}
	return Verdict{}, false
}

// change makes one change to the verdicts and publishes them for Cached.
// Every change goes through it: what Cached reads is then what the table
// held after one of them, evictions included.
func (p *Probes) change(edit func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	edit()
	kept := make(map[string]Verdict, p.verdicts.Len())
	for _, endpoint := range p.verdicts.Keys() {
		if v, ok := p.verdicts.Peek(endpoint); ok {
			kept[endpoint] = v
		}
	}
	p.kept.Store(&kept)
}

// ProbeKey names the upstream endpoint r's verdict is kept under: the
// path, on the route's configured upstream (one Probes serves one route).
// Not the Host the client names: that does not choose the upstream, and a
// client naming hosts at will would otherwise probe and evict verdicts at
// will.
func ProbeKey(r *http.Request) string { return r.URL.Path }

// ConfirmV2025 keeps the verdict that endpoint, which answered the probe
// 404 or 405, speaks only 2025-11-25: an upstream session opened there. A
// verdict kept meanwhile, or a probe under way, stands.
func (p *Probes) ConfirmV2025(endpoint string) {
	if _, ok := p.fresh(endpoint); ok {
		return
	}
	if _, ok := p.probing.Load(endpoint); ok {
		return
	}
	p.change(func() { p.verdicts.Add(endpoint, Verdict{V2025: true, at: time.Now()}) })
}

// Forget makes the next request of endpoint probe again.
func (p *Probes) Forget(endpoint string) { p.change(func() { p.verdicts.Remove(endpoint) }) }

// ForgetAll makes the next request of every endpoint probe again.
func (p *Probes) ForgetAll() { p.change(p.verdicts.Purge) }

// Len is the number of endpoints whose verdict is kept.
func (p *Probes) Len() int { return p.verdicts.Len() }

// request is the probe of r's endpoint: server/discover as a 2026-07-28
// client that declares the tasks extension. It runs on r's context
// without its cancellation, bounded by probeTimeout alone: the verdict
// serves every caller, so a caller that leaves (its connection dropped)
// must not cut the answer short, which would read as a wrong verdict.
func (p *Probes) request(r *http.Request) *http.Request {
	id := json.RawMessage(`"` + jsonrpc.GatewayIDPrefix + `probe"`)
	body, _ := jsonrpc.RequestBytes(id, "server/discover", map[string]any{"_meta": map[string]any{
		MetaProtocolVersion:    string(task.Era2026),
		MetaClientCapabilities: map[string]any{"extensions": map[string]any{ExtensionTasks: map[string]any{}}},
	}})
	// A detached copy: the probe must not write to the client request's
	// handler state (Caddy's variables), which the request itself uses next.
	req := upstream.NewRequest(context.WithoutCancel(r.Context()), p.detach(r), body)
	// The verdict serves every caller of the endpoint, so the probe carries
	// none of this caller's headers (cookies, session ids, headers of its
	// own choosing that could steer the upstream's answer), only the Host
	// (the request's, which routes it) and Authorization: an upstream that
	// wants credentials refuses the probe without them, and a refusal
	// (401, 403) is never kept.
	req.Header = http.Header{
		"Content-Type": req.Header.Values("Content-Type"),
		"Accept":       req.Header.Values("Accept"),
	}
	if auth := r.Header.Values("Authorization"); len(auth) > 0 {
		req.Header["Authorization"] = slices.Clone(auth)
	}
	req.Header.Set(upstream.HeaderProtocolVersion, string(task.Era2026))
	req.Header.Set(upstream.HeaderMethod, "server/discover")
	return req
}

// ask sends the probe and reads its answer: a discover result listing
// 2026-07-28, or one of the 2026-07-28 error codes, is a 2026-07-28
// server; a refusal of the caller (401, 403), a 5xx, a failure to reach
// it, an answer that cannot be read and any other status without a
// JSON-RPC message say nothing; anything else (a 400 asking for a
// session with a JSON-RPC error, 404, 405, a JSON-RPC error) is a
// 2025-only server.
func (p *Probes) ask(req *http.Request, next http.Handler) probeResult {
	ctx, cancel := context.WithTimeout(req.Context(), probeTimeout)
	defer cancel()
	resp, err := upstream.Call(next, req.WithContext(ctx))
	if err != nil {
		p.log.Warn("probing the upstream's protocol", zap.Error(err))
		return probeResult{}
	}
	var answer *jsonrpc.Message
	if resp.Status >= 200 && resp.Status <= 299 {
		answer, _ = upstream.ReadAnswer(resp, nil, 1<<20)
		upstream.FinishBody(resp.Body, time.Second)
	} else {
		data := make([]byte, 0, 512)
		buf := make([]byte, 4096)
		for len(data) < 64<<10 {
			n, err := resp.Body.Read(buf)
			data = append(data, buf[:n]...)
			if err != nil {
				break
			}
		}
		upstream.FinishBody(resp.Body, time.Second)
		answer, _ = jsonrpc.Parse(data)
	}
	v2025, known := classifyProbe(resp.Status, answer)
	res := probeResult{v: Verdict{V2025: v2025, at: time.Now()}, known: known,
		notFound: resp.Status == http.StatusNotFound || resp.Status == http.StatusMethodNotAllowed}
	if known && !v2025 && answer != nil && answer.Result != nil {
		res.v.TasksExtension = advertisesTasksExtension(answer.Result)
		res.v.V2026Only = withoutV2025(answer.Result)
	}
	return res
}

// classifyProbe is ask's reading of an answer (nil when there is no
// JSON-RPC message to read).
func classifyProbe(status int, answer *jsonrpc.Message) (v2025, known bool) {
	if RefusesCaller(status) || status >= 500 {
		return false, false
	}
	if answer == nil {
		// Only a path the upstream does not serve says something without
		// a message: a cut or garbled answer, or a refusal of the
		// request's shape (a proxy's 400, a 429), is no verdict.
		notServed := status == http.StatusNotFound || status == http.StatusMethodNotAllowed
		return notServed, notServed
	}
	if answer != nil && answer.Error != nil {
		switch answer.Error.Code {
		case jsonrpc.CodeHeaderMismatch, jsonrpc.CodeMissingRequiredClientCapability:
			return false, true
		case jsonrpc.CodeUnsupportedProtocolVersion:
			var data struct {
				Supported []string `json:"supported"`
			}
			_ = json.Unmarshal(answer.Error.Data, &data)
			if slices.Contains(data.Supported, string(task.Era2026)) {
				return false, true
			}
			return true, true
		}
		return true, true
	}
	if answer != nil && answer.Result != nil {
		var res struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if json.Unmarshal(answer.Result, &res) == nil {
			if slices.Contains(res.SupportedVersions, string(task.Era2026)) {
				return false, true
			}
		}
	}
	return true, true
}

// withoutV2025 reports whether a server/discover result lists its
// supportedVersions and 2025-11-25 is not among them. A result without
// the list says nothing: such an upstream is taken to speak 2025-11-25
// too, and its 2025-11-25 clients pass through as before.
func withoutV2025(result []byte) bool {
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(result, &res) != nil || len(res.SupportedVersions) == 0 {
		return false
	}
	return !slices.Contains(res.SupportedVersions, string(task.Era2025))
}

// advertisesTasksExtension reports whether a server/discover result lists
// the tasks extension among its capabilities.
func advertisesTasksExtension(result []byte) bool {
	caps, ok := jsonx.Get(result, "capabilities")
	if !ok {
		return false
	}
	ext, ok := jsonx.Get(caps, "extensions")
	if !ok {
		return false
	}
	v, ok := jsonx.Get(ext, ExtensionTasks)
	return ok && len(v) > 0 && v[0] == '{'
}
