package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Upstream sessions of the version bridge. A 2025-11-25 server keeps state
// per session (what the client declared it can answer, the tools it lists
// for that, its pending requests), so the gateway holds one session per
// principal, endpoint and set of client capabilities it can use
// (elicitation, sampling, roots: present or not), and never lets another
// principal's request near it. The table is bounded, in
// all and per principal: idle sessions expire; when it is full a new
// session takes the place of the principal's own least recently used idle
// one, or of anyone's while the principal holds less than its share; when
// every session is in use the new one is refused (the bound is never
// exceeded). A session the gateway lets go is ended upstream with DELETE.
// Nothing of it is stored.

const (
	// maxBridgeSessions bounds the upstream sessions one route holds.
	maxBridgeSessions = 256
	// maxBridgeSessionsPerOwner bounds one principal's: one for each set
	// of the capabilities the bridge tells apart, on one endpoint.
	maxBridgeSessionsPerOwner = 8
	// bridgeSessionIdle is how long an unused session is kept.
	bridgeSessionIdle = 10 * time.Minute
	// bridgeV2025Version is the version the bridge speaks upstream.
	bridgeV2025Version = string(task.Era2025)
)

// bridgeSession is one upstream session.
type bridgeSession struct {
	table *bridgeSessions
	key   string
	owner string

	// id is the upstream's Mcp-Session-Id ("" for a server without
	// sessions) and version the protocol version it agreed to.
	id, version string
	// What its initialize result said, for server/discover.
	capabilities, serverInfo json.RawMessage
	instructions             string

	// base and next send the DELETE that ends the session.
	base *http.Request
	next http.Handler

	ready chan struct{} // closed once opened (or failed: err)
	err   error
	// Guarded by the table's lock.
	refs     int
	lastUsed time.Time
}

// release gives back what acquire handed out.
func (s *bridgeSession) release() {
	t := s.table
	t.mu.Lock()
	s.refs--
	s.lastUsed = t.now()
	orphan := t.closed && s.refs == 0 && s.err == nil && isClosed(s.ready)
	t.mu.Unlock()
	if orphan { // the last call of a closed table's session has ended
		t.end([]*bridgeSession{s})
	}
}

// bridgeSessions is the table of a route's upstream sessions.
type bridgeSessions struct {
	mu       sync.Mutex
	byKey    map[string]*bridgeSession
	owners   map[string]int // sessions in byKey per owner
	max      int
	perOwner int
	idle     time.Duration
	closed   bool
	sweeper  bool
	stop     chan struct{}
	log      *zap.Logger
	// now is the table's clock (time.Now): when sessions were last used
	// and when they idled out. Tests step it instead of sleeping.
	now func() time.Time
}

func newBridgeSessions(max int, idle time.Duration) *bridgeSessions {
	return &bridgeSessions{byKey: map[string]*bridgeSession{}, owners: map[string]int{}, max: max, perOwner: min(max, maxBridgeSessionsPerOwner),
		idle: idle, stop: make(chan struct{}), log: zap.NewNop(), now: time.Now}
}

// acquireBridgeSession returns the caller's session for the request's
// capabilities (see acquire).
func (c *call) acquireBridgeSession(meta v2026.RequestMeta) (*bridgeSession, error) {
	return c.acquireBridgeSessionIn(c.b.sessions, meta, c.openBridgeSession(meta))
}

// acquireBridgeSessionIn is acquireBridgeSession on table t. The session is
// keyed by UpstreamOwner but counted against the caller's owner: anonymous
// callers with many credentials are one owner to the table's limits, so
// one of them cannot take every session (and evict everyone's idle ones)
// by sending another made-up token with each call.
func (c *call) acquireBridgeSessionIn(t *bridgeSessions, meta v2026.RequestMeta, open func(context.Context) (*bridgeSession, error)) (*bridgeSession, error) {
	return t.acquire(c.R.Context(), c.Owner, c.bridgeSessionKey(meta), open)
}

// acquire returns owner's session of key, opening it with open when there
// is none and the table has room for it; concurrent callers of one key
// wait for the one open. The caller must release it.
func (t *bridgeSessions) acquire(ctx context.Context, owner, key string, open func(ctx context.Context) (*bridgeSession, error)) (*bridgeSession, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("the gateway is shutting down")
	}
	if !t.sweeper {
		t.sweeper = true
		go t.sweep()
	}
	s, ok := t.byKey[key]
	if !ok {
		evicted, refusal := t.makeRoomLocked(owner, t.now())
		if refusal != nil {
			t.mu.Unlock()
			t.end(evicted)
			return nil, refusal
		}
		s = &bridgeSession{table: t, key: key, owner: owner, ready: make(chan struct{})}
		t.byKey[key] = s
		t.owners[owner]++
		s.refs++
		t.mu.Unlock()
		t.end(evicted)
		// The open outlives the request that started it: others wait for it.
		octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		opened, err := open(octx)
		cancel()
		t.mu.Lock()
		if err != nil {
			s.err = err
			t.deleteLocked(s)
		} else {
			s.id, s.version = opened.id, opened.version
			s.capabilities, s.serverInfo, s.instructions = opened.capabilities, opened.serverInfo, opened.instructions
			s.base, s.next = opened.base, opened.next
		}
		close(s.ready)
		evicted = t.evictLocked(t.now())
		t.mu.Unlock()
		t.end(evicted)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	s.refs++
	t.mu.Unlock()
	select {
	case <-s.ready:
	case <-ctx.Done():
		s.release()
		return nil, context.Cause(ctx)
	}
	if s.err != nil {
		s.release()
		return nil, s.err
	}
	return s, nil
}

// drop forgets s, which the upstream no longer knows (it answered 404), so
// that the next acquire opens a new session.
func (t *bridgeSessions) drop(s *bridgeSession) {
	t.mu.Lock()
	t.deleteLocked(s)
	t.mu.Unlock()
}

// deleteLocked removes s from the table, if it is still there.
func (t *bridgeSessions) deleteLocked(s *bridgeSession) {
	if t.byKey[s.key] != s {
		return
	}
	delete(t.byKey, s.key)
	if t.owners[s.owner]--; t.owners[s.owner] <= 0 {
		delete(t.owners, s.owner)
	}
}

// idleLocked reports whether s may be let go: opened, and no call uses it.
func idleLocked(s *bridgeSession) bool { return s.refs == 0 && isClosed(s.ready) }

// makeRoomLocked makes room for one more session of owner, or says why
// there is none. It expires the idle sessions first; then, with owner at
// its own bound, owner's least recently used idle session goes; with the
// table full, owner's own goes first, and another owner's only while owner
// holds less than its share of the table (the bound over the owners
// holding sessions), so that no one displaces others to hold more. It
// returns the sessions to be ended.
func (t *bridgeSessions) makeRoomLocked(owner string, now time.Time) ([]*bridgeSession, *jsonrpc.Error) {
	out := t.evictLocked(now)
	lru := func(ofOwner bool) *bridgeSession {
		var oldest *bridgeSession
		for _, s := range t.byKey {
			if (s.owner == owner) == ofOwner && idleLocked(s) && (oldest == nil || s.lastUsed.Before(oldest.lastUsed)) {
				oldest = s
			}
		}
		return oldest
	}
	if t.owners[owner] >= t.perOwner {
		s := lru(true)
		if s == nil {
			return out, jsonrpc.Errorf(jsonrpc.CodeTooManyTasks, "too many upstream sessions of the version bridge in use for this principal (limit %d); retry when a call has ended", t.perOwner)
		}
		t.deleteLocked(s)
		out = append(out, s)
	}
	if len(t.byKey) < t.max {
		return out, nil
	}
	s := lru(true)
	if s == nil {
		owners := len(t.owners)
		if t.owners[owner] == 0 {
			owners++
		}
		if t.owners[owner] < max(1, t.max/owners) {
			s = lru(false)
		}
	}
	if s == nil {
		return out, jsonrpc.Errorf(jsonrpc.CodeTooManyTasks, "the version bridge holds as many upstream sessions as it may (limit %d), all in use; retry later", t.max)
	}
	t.deleteLocked(s)
	return append(out, s), nil
}

// evictLocked removes the sessions idle for too long and, over the bound,
// the least recently used idle ones; it returns them to be ended.
func (t *bridgeSessions) evictLocked(now time.Time) []*bridgeSession {
	var out []*bridgeSession
	for _, s := range t.byKey {
		if idleLocked(s) && now.Sub(s.lastUsed) > t.idle {
			t.deleteLocked(s)
			out = append(out, s)
		}
	}
	return out
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// sweep expires idle sessions while the table is open.
func (t *bridgeSessions) sweep() {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			t.mu.Lock()
			evicted := t.evictLocked(t.now())
			t.mu.Unlock()
			t.end(evicted)
		case <-t.stop:
			return
		}
	}
}

// close ends every session not in use (those in use end with their last
// call, a task's say): the configuration is going away.
func (t *bridgeSessions) close() {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	t.closed = true
	close(t.stop)
	var all []*bridgeSession
	for k, s := range t.byKey {
		if isClosed(s.ready) && s.err == nil && s.refs == 0 {
			all = append(all, s)
		}
		delete(t.byKey, k)
	}
	t.owners = map[string]int{}
	t.mu.Unlock()
	t.end(all)
}

// end sends DELETE for each session, in the background.
func (t *bridgeSessions) end(sessions []*bridgeSession) {
	for _, s := range sessions {
		if s.err != nil || s.id == "" || s.base == nil {
			continue
		}
		go func(s *bridgeSession) {
			ctx, cancel := context.WithTimeout(runners.Inherit(context.Background(), s.base.Context()), 5*time.Second)
			defer cancel()
			req := upstream.NewRequest(ctx, s.base, nil)
			req.Method, req.Body, req.GetBody, req.ContentLength = http.MethodDelete, http.NoBody, nil, 0
			req.Header.Del("Content-Type")
			req.Header.Set(upstream.HeaderSessionID, s.id)
			req.Header.Set(upstream.HeaderProtocolVersion, s.version)
			resp, err := upstream.Call(s.next, req)
			if err != nil {
				t.log.Debug("ending an upstream session", zap.Error(err))
				return
			}
			upstream.FinishBody(resp.Body, time.Second)
		}(s)
	}
}

// bridgeClientCapabilities are the client capabilities a 2025-11-25
// session declares for the bridge: those of the 2026-07-28 request that a
// 2025-11-25 server can use (what it may ask the client for).
var bridgeClientCapabilities = []string{"elicitation", "sampling", "roots"}

// bridgeCapabilities picks them out of the request's client capabilities,
// as canonical JSON (sorted keys, compact): the session key and the
// initialize's capabilities.
func bridgeCapabilities(meta v2026.RequestMeta) json.RawMessage {
	picked := map[string]json.RawMessage{}
	for _, k := range bridgeClientCapabilities {
		if v, ok := jsonx.Get(meta.Capabilities, k); ok && len(v) > 0 && v[0] == '{' {
			var buf bytes.Buffer
			if json.Compact(&buf, v) == nil {
				picked[k] = buf.Bytes()
			}
		}
	}
	out, _ := json.Marshal(picked)
	return out
}

// bridgeCapabilityNames names the capabilities of bridgeCapabilities
// the request declares, in a fixed order.
func bridgeCapabilityNames(meta v2026.RequestMeta) string {
	var names []string
	for _, k := range bridgeClientCapabilities {
		if v, ok := jsonx.Get(meta.Capabilities, k); ok && len(v) > 0 && v[0] == '{' {
			names = append(names, k)
		}
	}
	return strings.Join(names, ",")
}

// bridgeSessionKey names the session of the caller at the request's
// endpoint with the request's capabilities: by their names only, so that a caller varying their
// contents cannot open sessions without end (a later request with other
// contents shares the session the first one opened).
func (c *call) bridgeSessionKey(meta v2026.RequestMeta) string {
	return c.UpstreamOwner() + "\x00" + wire.Endpoint(c.R) + "\x00" + bridgeCapabilityNames(meta)
}

// openBridgeSession returns how to open the caller's session: initialize
// with the request's capabilities and client info, then
// notifications/initialized.
func (c *call) openBridgeSession(meta v2026.RequestMeta) func(ctx context.Context) (*bridgeSession, error) {
	// owner keys the session; principal is what the log says of whose it
	// is: for anonymous callers owner holds an unsalted digest of their
	// Authorization, which for basic credentials is a password hash.
	owner, principal := c.UpstreamOwner(), c.Owner
	base := c.Detach(c.R)
	base = base.WithContext(upstream.WithMaxResult(upstream.WithDetach(base.Context(), c.Detach), c.MaxResultBytes))
	base.Header.Del(upstream.HeaderSessionID)
	base.Header.Del(upstream.HeaderMethod)
	base.Header.Del(upstream.HeaderName)
	base.Header.Del(upstream.HeaderProtocolVersion)
	next := c.Next
	clientInfo := json.RawMessage(`{"name":"caddy-mcp-tasks-bridge","version":"1"}`)
	if info, ok := jsonx.Get(jsonx.OrEmptyObject(jsonx.GetOr(c.Msg.Params, "_meta")), translate.MetaClientInfo); ok && len(info) > 0 && info[0] == '{' {
		clientInfo = info
	}
	caps := bridgeCapabilities(meta)
	endpoint := wire.ProbeKey(c.R)
	return func(ctx context.Context) (*bridgeSession, error) {
		s, err := initializeUpstream(ctx, base, next, caps, clientInfo)
		if err != nil {
			c.Log.Warn("version bridge: opening an upstream session", zap.Error(err))
			c.Probes.Forget(endpoint) // the upstream may have changed: probe again
			return nil, err
		}
		c.Probes.ConfirmV2025(endpoint) // a 2025-11-25 server is there
		s.owner = owner
		// Whether the upstream runs tool calls as tasks of its own, as a
		// passed-through initialize would teach it
		// ([wire.UpstreamCaps.LearnInitialize]).
		if init, err := json.Marshal(map[string]json.RawMessage{"capabilities": jsonx.OrEmptyObject(s.capabilities)}); err == nil {
			c.Tools.Caps.LearnInitialize(init)
		}
		if ce := c.Log.Check(zap.InfoLevel, "version bridge: upstream session opened"); ce != nil {
			ce.Write(zap.String("owner", principal), zap.String("upstream_session", s.id), zap.String("version", s.version))
		}
		return s, nil
	}
}

// initializeUpstream runs the 2025-11-25 handshake on base's endpoint.
func initializeUpstream(ctx context.Context, base *http.Request, next http.Handler, caps, clientInfo json.RawMessage) (*bridgeSession, error) {
	id := json.RawMessage(`"` + jsonrpc.GatewayIDPrefix + `bridge:initialize"`)
	body, err := jsonrpc.RequestBytes(id, "initialize", map[string]any{
		"protocolVersion": bridgeV2025Version,
		"capabilities":    caps,
		"clientInfo":      clientInfo,
	})
	if err != nil {
		return nil, fmt.Errorf("encoding initialize: %w", err)
	}
	resp, err := upstream.Call(next, upstream.NewRequest(ctx, base, body))
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if resp.Status < 200 || resp.Status > 299 {
		upstream.FinishBody(resp.Body, time.Second)
		return nil, fmt.Errorf("initialize: the upstream answered HTTP %d", resp.Status)
	}
	answer, err := upstream.ReadAnswer(resp, id, upstream.MaxResultOf(base.Context()))
	upstream.FinishBody(resp.Body, time.Second)
	if answer == nil {
		return nil, fmt.Errorf("initialize: no answer: %w", err)
	}
	if answer.Error != nil {
		return nil, fmt.Errorf("initialize: %w", answer.Error)
	}
	var res struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions"`
	}
	if err := json.Unmarshal(answer.Result, &res); err != nil {
		return nil, fmt.Errorf("initialize: reading the result: %w", err)
	}
	s := &bridgeSession{
		id: resp.Header.Get(upstream.HeaderSessionID), version: res.ProtocolVersion,
		capabilities: res.Capabilities, serverInfo: res.ServerInfo, instructions: res.Instructions,
		base: base, next: next,
	}
	if s.version == "" {
		s.version = bridgeV2025Version
	}
	note, _ := jsonrpc.RequestBytes(nil, "notifications/initialized", nil)
	req := upstream.NewRequest(ctx, base, note)
	if s.id != "" {
		req.Header.Set(upstream.HeaderSessionID, s.id)
	}
	req.Header.Set(upstream.HeaderProtocolVersion, s.version)
	nresp, err := upstream.Call(next, req)
	if err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	upstream.FinishBody(nresp.Body, time.Second)
	if nresp.Status >= 300 {
		return nil, fmt.Errorf("notifications/initialized: the upstream answered HTTP %d", nresp.Status)
	}
	return s, nil
}
