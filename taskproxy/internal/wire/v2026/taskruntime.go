package v2026

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Whether a 2026-07-28 upstream runs tasks itself: its server/discover
// answer lists the io.modelcontextprotocol/tasks extension. 2026-07-28 has
// no per-tool task mode on the wire (the server decides per call), so this
// is all the gateway can learn ahead: calls to such an upstream keep the
// extension declared, and an upstream CreateTaskResult becomes a followed
// task (followed.go). The gateway asks with a discover of its own,
// per endpoint, cached for as long as the bridge's probe verdicts and as
// bounded; one discover of an endpoint runs at a time.

// taskRuntimes is what the gateway knows of its upstreams' own 2026-07-28
// tasks, per endpoint.
type taskRuntimes struct {
	mu       sync.Mutex
	verdicts map[string]*taskRuntimeVerdict
}

// taskRuntimeVerdict is one endpoint's answer: ext once known, or the
// discover in flight (probing, closed when it is done).
type taskRuntimeVerdict struct {
	ext      bool
	at       time.Time
	probing  chan struct{}
	answered bool
}

// upstreamRunsTasks reports whether the request's endpoint advertises
// the tasks extension, asking it when nothing recent is known. An upstream
// that cannot be asked (down, refusing the caller) counts as not
// advertising it, and is asked again at the next call.
func (c *call) upstreamRunsTasks() bool {
	s := &c.h.taskRuntimes
	endpoint := wire.Endpoint(c.R)
	for {
		s.mu.Lock()
		if s.verdicts == nil {
			s.verdicts = map[string]*taskRuntimeVerdict{}
		}
		v := s.verdicts[endpoint]
		switch {
		case v != nil && v.probing != nil:
			wait := v.probing
			s.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-c.R.Context().Done():
				return false
			}
		case v != nil && v.answered && time.Since(v.at) < wire.ProbeTTL:
			s.mu.Unlock()
			return v.ext
		}
		s.makeRoomLocked()
		v = &taskRuntimeVerdict{probing: make(chan struct{})}
		s.verdicts[endpoint] = v
		s.mu.Unlock()

		ext, answered := c.discoverTasksExtension()
		s.mu.Lock()
		close(v.probing)
		v.probing = nil
		if answered {
			v.ext, v.answered, v.at = ext, true, time.Now()
		} else {
			delete(s.verdicts, endpoint)
		}
		s.mu.Unlock()
		return ext
	}
}

// makeRoomLocked keeps the verdicts within their bound (wire.MakeRoom): a
// route may front many hosts, and each is an endpoint.
func (s *taskRuntimes) makeRoomLocked() {
	wire.MakeRoom(s.verdicts, func(v *taskRuntimeVerdict) time.Time { return v.at }, func(v *taskRuntimeVerdict) bool { return v.probing != nil })
}

// discoverTasksExtension sends server/discover as a 2026-07-28 client and
// reports whether the answer lists the tasks extension; answered is false
// when the upstream could not be asked (the verdict is then not kept).
// Like the bridge's probe, it carries only the Host and the caller's
// Authorization, since the verdict serves every caller of the endpoint.
func (c *call) discoverTasksExtension() (ext, answered bool) {
	ctx, cancel := context.WithTimeout(c.R.Context(), 10*time.Second)
	defer cancel()
	id := json.RawMessage(`"` + jsonrpc.GatewayIDPrefix + `discover-tasks"`)
	body, _ := jsonrpc.RequestBytes(id, "server/discover", map[string]any{"_meta": map[string]any{
		wire.MetaProtocolVersion:    string(task.Era2026),
		wire.MetaClientCapabilities: map[string]any{"extensions": map[string]any{wire.ExtensionTasks: map[string]any{}}},
	}})
	req := upstream.NewRequest(ctx, c.Detach(c.R), body)
	req.Header = http.Header{
		"Content-Type": req.Header.Values("Content-Type"),
		"Accept":       req.Header.Values("Accept"),
	}
	if auth := c.R.Header.Values("Authorization"); len(auth) > 0 {
		req.Header["Authorization"] = auth
	}
	req.Header.Set(upstream.HeaderProtocolVersion, string(task.Era2026))
	req.Header.Set(upstream.HeaderMethod, "server/discover")
	resp, err := upstream.Call(c.Next, req)
	if err != nil {
		c.Log.Warn("asking the upstream whether it runs tasks", zap.Error(err))
		return false, false
	}
	defer upstream.FinishBody(resp.Body, time.Second)
	if wire.RefusesCaller(resp.Status) || resp.Status >= 500 {
		return false, false
	}
	if resp.Status < 200 || resp.Status > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return false, true // not a discover-answering server
	}
	answer, _ := upstream.ReadAnswer(resp, nil, 1<<20)
	if answer == nil || answer.Result == nil {
		return false, true
	}
	return advertisesTasksExtension(answer.Result), true
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
	v, ok := jsonx.Get(ext, wire.ExtensionTasks)
	return ok && len(v) > 0 && v[0] == '{'
}
