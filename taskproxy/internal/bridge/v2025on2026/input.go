package v2025on2026

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Input during a plain call. A 2026-07-28 upstream asks for input by
// answering the call with an InputRequiredResult (inputRequests and a
// requestState) or, for a task awaited on the call, by the task's
// inputRequests. A 2025-11-25 client is asked as any 2025-11-25 server
// asks: each input request goes to it as a JSON-RPC request
// (elicitation/create, sampling/createMessage, roots/list) on the call's
// event stream, under an id of the gateway's, and the client POSTs its
// response on the session. Once every request of the round is answered,
// the call is sent again with inputResponses and the requestState (or the
// answers go to the upstream's task with tasks/update), and the next
// answer is handled the same way, for at most maxInputRounds rounds.

const (
	// inputWaitTimeout bounds how long one round waits for the client's
	// answers.
	inputWaitTimeout = 5 * time.Minute
	// maxInputRounds bounds the rounds of one call.
	maxInputRounds = 16
	// inputIDPrefix starts the ids of the input requests the bridge sends.
	inputIDPrefix = jsonrpc.GatewayIDPrefix + "v2025on2026:"
)

// errNoInputChannel refuses input a client cannot be asked for: its
// request takes no event stream, or names no session to answer on.
var errNoInputChannel = jsonrpc.Errorf(jsonrpc.CodeInternalError,
	"the upstream asks for input to answer this request; the gateway relays it only on a session whose request accepts text/event-stream")

// inputRound is one round of input requests sent to a client, waiting for
// its answers.
type inputRound struct {
	sid  string
	keys []string // by the index in the request ids
	mu   sync.Mutex
	got  map[string]json.RawMessage
	err  *jsonrpc.Error
	done chan struct{}
}

// answer records the client's response to the request with index i; it
// reports false when the round does not know it.
func (r *inputRound) answer(i int, m *jsonrpc.Message) bool {
	if i < 0 || i >= len(r.keys) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil || len(r.got) == len(r.keys) {
		return true
	}
	if m.Error != nil {
		r.err = m.Error
		close(r.done)
		return true
	}
	r.got[r.keys[i]] = m.Result
	if len(r.got) == len(r.keys) {
		close(r.done)
	}
	return true
}

// serveInputAnswer takes a client's response to an input request of the
// bridge's, on the session that was asked; a response to anything else is
// ignored.
func (c *call) serveInputAnswer() {
	var id string
	if json.Unmarshal(c.Msg.ID, &id) != nil || !strings.HasPrefix(id, inputIDPrefix) {
		return
	}
	round, index, ok := strings.Cut(strings.TrimPrefix(id, inputIDPrefix), ":")
	i, err := strconv.Atoi(index)
	if !ok || err != nil {
		return
	}
	v, found := c.b.rounds.Load(round)
	if !found || v.(*inputRound).sid != c.sid {
		return // another session's (or none): as unknown
	}
	v.(*inputRound).answer(i, c.Msg)
}

// ask sends the client the input requests (by the upstream's keys) on
// rep's event stream and waits for the answers, by the same keys.
func (c *call) ask(ctx context.Context, rep *reply, requests map[string]json.RawMessage) (map[string]json.RawMessage, *jsonrpc.Error) {
	if c.sid == "" || !wire.AcceptsSSE(c.R) {
		return nil, errNoInputChannel
	}
	name := task.NewTaskID()
	round := &inputRound{sid: c.sid, got: map[string]json.RawMessage{}, done: make(chan struct{})}
	// The round is complete (every key, every request encoded) before it
	// is stored and its first request goes out: a client answering that
	// one at once must not find a round of fewer keys.
	var sends [][]byte
	for _, k := range sortedKeys(requests) {
		var req struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(requests[k], &req) != nil || req.Method == "" {
			return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream sent a malformed input request %q", k)
		}
		id, _ := json.Marshal(inputIDPrefix + name + ":" + strconv.Itoa(len(round.keys)))
		round.keys = append(round.keys, k)
		data, err := jsonrpc.RequestBytes(id, req.Method, req.Params)
		if err != nil {
			return nil, rpcerr.InternalError(c.Log, "encoding an input request", err)
		}
		sends = append(sends, data)
	}
	c.b.rounds.Store(name, round)
	defer c.b.rounds.Delete(name)
	for _, data := range sends {
		rep.request(data)
	}
	timer := time.NewTimer(inputWaitTimeout)
	defer timer.Stop()
	select {
	case <-round.done:
	case <-timer.C:
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the input the upstream asked for was not given within %s", inputWaitTimeout)
	case <-ctx.Done():
		return nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", context.Cause(ctx))
	}
	round.mu.Lock()
	defer round.mu.Unlock()
	if round.err != nil {
		return nil, round.err
	}
	return maps.Clone(round.got), nil
}

// sortedKeys are m's keys in order, so that the client sees the requests
// of a round in a stable order.
func sortedKeys(m map[string]json.RawMessage) []string { return slices.Sorted(maps.Keys(m)) }

// answerRounds asks the client for the input of ev, an InputRequiredResult
// answering params, and sends the call again with the answers (with
// retry: done reports that it answered the client itself), round after
// round, until the upstream answers otherwise; it returns that answer (or
// the error that stopped the rounds).
func (c *call) answerRounds(ctx context.Context, rep *reply, params json.RawMessage, ev upstream.Event, retry func(json.RawMessage) (upstream.Event, bool)) (_ upstream.Event, done bool, _ *jsonrpc.Error) {
	for range maxInputRounds {
		if ev.Err != nil || ev.Final.Error != nil || !upstream.IsInputRequired(ev.Final.Result) {
			return ev, false, nil
		}
		var in struct {
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  json.RawMessage            `json:"requestState"`
		}
		if err := json.Unmarshal(ev.Final.Result, &in); err != nil || len(in.InputRequests) == 0 {
			return ev, false, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream asked for input without input requests")
		}
		answers, e := c.ask(ctx, rep, in.InputRequests)
		if e != nil {
			return ev, false, e
		}
		responses, _ := json.Marshal(answers)
		next, err := jsonx.Set(params, "inputResponses", responses)
		if err == nil && len(in.RequestState) > 0 {
			next, err = jsonx.Set(next, "requestState", in.RequestState)
		}
		if err != nil {
			return ev, false, rpcerr.InternalError(c.Log, "building the retry", err)
		}
		if ev, done = retry(next); done {
			return ev, true, nil
		}
	}
	return ev, false, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the upstream asked for input more than %d times", maxInputRounds)
}
