package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The version bridge: a 2026-07-28 client in front of an upstream that
// speaks only 2025-11-25. The gateway learns once per route, by probing
// with server/discover, whether the upstream speaks 2026-07-28; when it
// does not, it answers 2026-07-28 requests itself on upstream sessions it
// holds per principal ([bridgeSessions]): server/discover from the
// upstream's initialize, tools/call with its input requests turned into
// input_required or a task ([bridgedCall]), and every other request
// translated both ways. 2025-11-25 traffic never waits for the probe.

// Bridge is a configuration's version bridge: what the probe learned per
// endpoint, the upstream sessions and the multi-round-trip calls waiting
// for input.
type Bridge struct {
	// Env is the configuration's (its policy, loggers, route, tools).
	*wire.Env
	// maxParkedPerOwner bounds one owner's calls waiting for input.
	maxParkedPerOwner int

	mu sync.Mutex
	// pinned, set by tests (Pin), answers for every endpoint.
	pinned *bool

	sessions *bridgeSessions
	parked   *parkedCalls
}

// New returns the bridge of the configuration env (whose Route may be set
// later: the route takes the bridge's SessionLost as a hook). One owner
// may have at most maxParkedPerOwner calls waiting for input.
func New(env *wire.Env, maxParkedPerOwner int) *Bridge {
	return &Bridge{Env: env, maxParkedPerOwner: maxParkedPerOwner, sessions: newBridgeSessions(maxBridgeSessions, bridgeSessionIdle), parked: newParkedCalls()}
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

// UpstreamIsV2025 reports whether r's endpoint speaks only 2025-11-25, by
// the configuration's probe of it (wire.Probes). A probe that learns
// nothing (the upstream is down, or refuses the caller) is not kept, and
// the request is passed through as before. Nor is a 404 or 405, which any
// path the upstream does not serve answers: the request is bridged, and the
// verdict kept only once an upstream session opens there
// (Probes.ConfirmV2025).
func (b *Bridge) UpstreamIsV2025(r *http.Request, next http.Handler) bool {
	b.mu.Lock()
	pinned := b.pinned
	b.mu.Unlock()
	if pinned != nil {
		return *pinned
	}
	v, known := b.Probes.Verdict(r, next)
	return known && v.V2025
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
	b.mu.Unlock()
	b.Probes.ForgetAll()
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
		c.fail(rpcerr.UpstreamFailure(c.Log, err))
		return nil
	}
	defer s.release()
	caps := s.capabilities
	if len(caps) == 0 || caps[0] != '{' {
		caps = json.RawMessage("{}")
	}
	caps, _ = jsonx.Delete(caps, "tasks") // the 2025-11-25 form; tasks are the extension here
	if caps, err = jsonx.SetPath(caps, []string{"extensions", wire.ExtensionTasks}, []byte("{}")); err != nil {
		c.fail(rpcerr.InternalError(c.Log, "building the discover result", err))
		return nil
	}
	res := map[string]any{
		"resultType":        "complete",
		"supportedVersions": v2026.SupportedVersions,
		"capabilities":      caps,
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
		ev, _ := bc.a.Until(bc.run.Ctx, nil, bc.relayOrRefuse(reply, nil))
		switch {
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
