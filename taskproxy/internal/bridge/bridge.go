package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The version bridge: a 2026-07-28 client in front of an upstream that
// speaks only 2025-11-25. The gateway learns once per route, by probing
// with server/discover, whether the upstream speaks 2026-07-28; when it
// does not, it answers 2026-07-28 requests itself on upstream sessions it
// holds per principal (sessions.go): server/discover from the
// upstream's initialize, tools/call with its input requests turned into
// input_required or a task (call.go), and every other request
// translated both ways. 2025-11-25 traffic never waits for the probe.

// probeVerdict is what the probe learned of one endpoint.
type probeVerdict struct {
	known    bool      // a probe gave a usable answer
	v2025    bool      // the upstream does not speak 2026-07-28 there
	probedAt time.Time // when
	probing  chan struct{}
}

// Bridge is a configuration's version bridge: what the probe learned per
// endpoint, the upstream sessions and the multi-round-trip calls waiting
// for input.
type Bridge struct {
	// Env is the configuration's (its policy, loggers, route, tools).
	*wire.Env
	// maxParkedPerOwner bounds one owner's calls waiting for input.
	maxParkedPerOwner int

	mu       sync.Mutex
	verdicts map[string]*probeVerdict // by bridgeEndpoint
	// pinned, set by tests (learned), answers for every endpoint.
	pinned *bool

	sessions *bridgeSessions
	parked   *parkedCalls
}

// New returns the bridge of the configuration env (whose Route may be set
// later: the route takes the bridge's SessionLost as a hook). One owner
// may have at most maxParkedPerOwner calls waiting for input.
func New(env *wire.Env, maxParkedPerOwner int) *Bridge {
	return &Bridge{Env: env, maxParkedPerOwner: maxParkedPerOwner, verdicts: map[string]*probeVerdict{}, sessions: newBridgeSessions(maxBridgeSessions, bridgeSessionIdle), parked: newParkedCalls()}
}

// Close lets go of what the bridge holds when its configuration goes: the
// calls waiting for a retry (their requestState names nothing in the next
// configuration) are cancelled upstream, and the idle sessions ended.
func (b *Bridge) Close() {
	b.parked.mu.Lock()
	calls := b.parked.calls
	b.parked.calls = map[string]*parkedCall{}
	b.parked.byOwner = map[string]int{}
	b.parked.mu.Unlock()
	for _, pc := range calls {
		// Whether or not its timer fired meanwhile (its take now finds
		// nothing), the call ends here; release is idempotent.
		pc.timer.Stop()
		pc.bc.cancelUpstream("the gateway's configuration was unloaded")
		pc.bc.run.Release()
	}
	b.sessions.close()
}

// Applies reports whether x, a 2026-07-28 request, goes through the
// bridge: the upstream does not speak 2026-07-28, and the gateway does not
// answer the method itself anyway (the task methods).
func (b *Bridge) Applies(x *wire.Exchange) bool {
	c := &call{Exchange: x, b: b}
	if !c.Msg.IsRequest() {
		return false
	}
	switch c.Msg.Method {
	case "tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "tasks/list":
		return false
	case "subscriptions/listen":
		if _, ok, _ := v2026.ListenTaskIDs(c.Msg.Params); ok {
			return false
		}
	}
	return c.b.UpstreamIsV2025(c.R, c.Next)
}

// UpstreamIsV2025 returns the cached probe answer for the request's
// endpoint, probing when there is none or it is stale. Only one probe of an
// endpoint runs at a time; the others wait for it. A probe that learns
// nothing (the upstream is down, or refuses the caller) is not kept, and
// the request is passed through as before. Nor is a 404 or 405, which any
// path the upstream does not serve answers: the request is bridged, and the
// verdict kept only once an upstream session opens there (confirmV2025).
func (b *Bridge) UpstreamIsV2025(r *http.Request, next http.Handler) bool {
	endpoint := wire.Endpoint(r)
	for {
		b.mu.Lock()
		if b.pinned != nil {
			v2025 := *b.pinned
			b.mu.Unlock()
			return v2025
		}
		v := b.verdicts[endpoint]
		if v != nil && v.known && time.Since(v.probedAt) < wire.ProbeTTL {
			v2025 := v.v2025
			b.mu.Unlock()
			return v2025
		}
		if v != nil && v.probing != nil {
			wait := v.probing
			b.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-r.Context().Done():
				return false
			}
		}
		if v == nil {
			v = &probeVerdict{}
			b.makeRoomLocked()
			b.verdicts[endpoint] = v
		}
		done := make(chan struct{})
		v.probing = done
		b.mu.Unlock()

		v2025, known, notFound := b.probe(r, next)
		b.mu.Lock()
		was, wasKnown := v.v2025, v.known
		v.probing = nil
		if known && !(v2025 && notFound) {
			v.known, v.v2025, v.probedAt = true, v2025, time.Now()
		}
		kept := v.known
		if !kept && b.verdicts[endpoint] == v {
			delete(b.verdicts, endpoint)
		}
		b.mu.Unlock()
		close(done)
		if kept && (!wasKnown || was != v2025) {
			b.Log.Info("upstream protocol probed", zap.String("endpoint", endpoint), zap.Bool("speaks_2026_07_28", !v2025), zap.Bool("version_bridge", v2025))
		}
		return known && v2025
	}
}

// makeRoomLocked keeps the verdicts within their bound (wire.MakeRoom).
func (b *Bridge) makeRoomLocked() {
	wire.MakeRoom(b.verdicts, func(v *probeVerdict) time.Time { return v.probedAt }, func(v *probeVerdict) bool { return v.probing != nil })
}

// confirmV2025 keeps the verdict that endpoint, which answered the probe
// 404 or 405, speaks only 2025-11-25: an upstream session opened there.
func (b *Bridge) confirmV2025(endpoint string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v := b.verdicts[endpoint]; v != nil && (v.known || v.probing != nil) {
		return // probed meanwhile: that answer stands
	}
	b.makeRoomLocked()
	b.verdicts[endpoint] = &probeVerdict{known: true, v2025: true, probedAt: time.Now()}
}

// Pin pins what the upstream speaks at every endpoint, as tests need.
func (b *Bridge) Pin(v2025 bool) {
	b.mu.Lock()
	b.pinned = &v2025
	b.mu.Unlock()
}

// ForgetProbe makes the next 2026-07-28 request of every endpoint probe
// again.
func (b *Bridge) ForgetProbe() {
	b.mu.Lock()
	b.pinned = nil
	b.verdicts = map[string]*probeVerdict{}
	b.mu.Unlock()
}

// forget makes the next 2026-07-28 request of endpoint probe again.
func (b *Bridge) forget(endpoint string) {
	b.mu.Lock()
	if v := b.verdicts[endpoint]; v != nil && v.probing == nil {
		delete(b.verdicts, endpoint)
	}
	b.mu.Unlock()
}

// probeUpstream sends server/discover as a 2026-07-28 client would and
// reads the answer: a discover result listing 2026-07-28, or one of the
// 2026-07-28 error codes, is a 2026-07-28 server; a refusal of the caller (401,
// 403) or a failure to reach it says nothing; anything else (a 400 asking
// for a session, 404, 405, a JSON-RPC error) is a 2025-only server.
// notFound reports a 404 or 405, which says as much of a path the upstream
// does not serve at all.
func (b *Bridge) probe(r *http.Request, next http.Handler) (v2025, known, notFound bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	id := json.RawMessage(`"` + jsonrpc.GatewayIDPrefix + `probe"`)
	body, _ := jsonrpc.RequestBytes(id, "server/discover", map[string]any{"_meta": map[string]any{
		wire.MetaProtocolVersion:    string(task.Era2026),
		wire.MetaClientCapabilities: map[string]any{},
	}})
	// A detached copy: the probe must not write to the client request's
	// handler state (Caddy's variables), which the request itself uses next.
	req := upstream.NewRequest(ctx, b.Detach(r), body)
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
		req.Header["Authorization"] = auth
	}
	req.Header.Set(upstream.HeaderProtocolVersion, string(task.Era2026))
	req.Header.Set(upstream.HeaderMethod, "server/discover")
	resp, err := upstream.Call(next, req)
	if err != nil {
		b.Log.Warn("probing the upstream's protocol", zap.Error(err))
		return false, false, false
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
	v2025, known = classifyProbe(resp.Status, answer)
	return v2025, known, resp.Status == http.StatusNotFound || resp.Status == http.StatusMethodNotAllowed
}

// classifyProbe is probeUpstream's reading of an answer.
func classifyProbe(status int, answer *jsonrpc.Message) (v2025, known bool) {
	if wire.RefusesCaller(status) || status >= 500 {
		return false, false
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
			for _, v := range data.Supported {
				if v == string(task.Era2026) {
					return false, true
				}
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
			for _, v := range res.SupportedVersions {
				if v == string(task.Era2026) {
					return false, true
				}
			}
		}
	}
	return true, true
}

// call is one 2026-07-28 request the bridge answers.
type call struct {
	*wire.Exchange
	b *Bridge
}

// fail writes e with its 2026-07-28 HTTP status.
func (c *call) fail(e *jsonrpc.Error) { v2026.Fail(c.Exchange, e) }

// Serve answers x, a 2026-07-28 request that Applies, on the principal's
// upstream session.
func (b *Bridge) Serve(x *wire.Exchange) error {
	c := &call{Exchange: x, b: b}
	if !v2026.Valid(c.Exchange, false) || !c.GuardOrigin() {
		return nil
	}
	meta, _ := v2026.ReadRequestMeta(c.Msg.Params)
	switch c.Msg.Method {
	case "server/discover":
		return c.bridgeDiscover(meta)
	case "tools/call":
		return c.serveBridgedToolsCall(meta)
	}
	return c.serveBridgedRequest(meta)
}

// bridgeDiscover answers server/discover from the upstream's initialize
// result, with the tasks extension the gateway serves.
func (c *call) bridgeDiscover(meta v2026.RequestMeta) error {
	s, err := c.acquireBridgeSession(meta)
	if err != nil {
		c.fail(runtime.UpstreamFailure(c.Log, err))
		return nil
	}
	defer s.release()
	caps := s.capabilities
	if len(caps) == 0 || caps[0] != '{' {
		caps = json.RawMessage("{}")
	}
	caps, _ = jsonx.Delete(caps, "tasks") // the 2025-11-25 form; tasks are the extension here
	if caps, err = jsonx.SetPath(caps, []string{"extensions", wire.ExtensionTasks}, []byte("{}")); err != nil {
		c.fail(runtime.InternalError(c.Log, "building the discover result", err))
		return nil
	}
	res := map[string]any{
		"resultType":              "complete",
		"supportedVersions": v2026.SupportedVersions,
		"capabilities":            caps,
		// Private: the answer comes from this principal's session; 0: an
		// upstream session that is re-initialized may change it.
		"ttlMs":      0,
		"cacheScope": "private",
	}
	if s.instructions != "" {
		res["instructions"] = s.instructions
	}
	if len(s.serverInfo) > 0 {
		res["_meta"] = map[string]json.RawMessage{translate.MetaServerInfo: s.serverInfo}
	}
	return c.Reply(res)
}

// serveBridgedRequest sends any other request (tools/list, resources/*,
// prompts/*, completion/complete, ...) on the principal's session and
// translates the answer. Input requests of the upstream are refused here:
// only tools/call carries them to the client.
func (c *call) serveBridgedRequest(meta v2026.RequestMeta) error {
	bc, e := c.startBridged(meta, c.Msg.Method)
	if e != nil {
		c.fail(e)
		return nil
	}
	stop := context.AfterFunc(c.R.Context(), func() { bc.run.Cancel(v2026.ErrClientGone) })
	defer stop()
	defer bc.run.Release()
	reply := v2026.NewReply(c.Exchange)
	for {
		ev, ok := <-bc.a.Events
		if !ok {
			ev = upstream.Event{Err: context.Cause(bc.run.Ctx)}
		}
		switch {
		case ev.Notification != nil:
			bc.relay(reply, ev.Notification)
			continue
		case ev.Request != nil:
			bc.refuseUpstreamRequest(ev.Request)
			continue
		case errors.Is(ev.Err, v2026.ErrClientGone):
			return nil
		case bc.sessionLost(ev):
			if e := bc.restart(c); e != nil {
				reply.Send(jsonrpc.ErrorBytes(c.Msg.ID, e), v2026.Status(e.Code))
				return nil
			}
			continue
		}
		bc.sendFinal(reply, ev)
		return nil
	}
}
