package taskruntime

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// plainWork runs a tool inside its tools/call request, for a tool that is
// not run as a task: a forbidden tool, or an optional one called without
// the extension. Input goes by multi round-trip requests (an
// InputRequiredResult, answered by a retry of the call with inputResponses
// and the echoed requestState); progress goes as notifications/progress on
// an SSE answer when the call carries a progressToken.
type plainWork struct {
	ctx   context.Context
	tool  string
	key   []byte
	given map[string]json.RawMessage // answers from requestState and inputResponses
	sse   *sseWriter                 // nil without a progressToken
}

// needInput stops a plain call that lacks answers; the handler turns it
// into an InputRequiredResult.
type needInput struct {
	requests map[string]any
	state    string
}

func (*needInput) Error() string { return "input required" }

// result is the InputRequiredResult that asks for n's requests.
func (n *needInput) result() map[string]any {
	return map[string]any{"resultType": "input_required", "inputRequests": n.requests, "requestState": n.state}
}

func (w *plainWork) step(k, n int, d time.Duration) error {
	if w.sse != nil {
		w.sse.progress(k, n, fmt.Sprintf("step %d of %d", k, n))
	}
	select {
	case <-time.After(d):
		return nil
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

func (w *plainWork) ask(reqs map[string]any) (map[string]json.RawMessage, error) {
	answers := make(map[string]json.RawMessage, len(reqs))
	missing := map[string]any{}
	for k, r := range reqs {
		if a, ok := w.given[k]; ok {
			answers[k] = a
		} else {
			missing[k] = r
		}
	}
	if len(missing) == 0 {
		return answers, nil
	}
	// Earlier rounds' answers travel in requestState: the client sends
	// only the latest round's inputResponses back.
	state, err := sealState(w.key, w.tool, w.given)
	if err != nil {
		return nil, err
	}
	return nil, &needInput{requests: missing, state: state}
}

// requestState is what a sealed requestState carries.
type requestState struct {
	Tool    string                     `json:"tool"`
	Answers map[string]json.RawMessage `json:"answers"`
}

// sealState encodes the answers so far, signed with key: requestState comes
// back from the client and must be treated as attacker-controlled.
func sealState(key []byte, tool string, answers map[string]json.RawMessage) (string, error) {
	b, err := json.Marshal(requestState{Tool: tool, Answers: answers})
	if err != nil {
		return "", fmt.Errorf("encoding requestState: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(b) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), nil
}

// openState checks and decodes a requestState sealed for tool.
func openState(key []byte, tool, state string) (map[string]json.RawMessage, error) {
	body, sig, ok := strings.Cut(state, ".")
	if !ok {
		return nil, fmt.Errorf("requestState is malformed")
	}
	b, err1 := base64.RawURLEncoding.DecodeString(body)
	got, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("requestState is malformed")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(b)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return nil, fmt.Errorf("requestState signature does not verify")
	}
	var st requestState
	if err := json.Unmarshal(b, &st); err != nil || st.Tool != tool {
		return nil, fmt.Errorf("requestState was not issued for tool %q", tool)
	}
	return st.Answers, nil
}

// sseWriter answers one request as an SSE stream: progress notifications,
// then the response.
type sseWriter struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	token   json.RawMessage
	started bool
}

func (s *sseWriter) event(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		h := s.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		s.w.WriteHeader(http.StatusOK)
		s.started = true
	}
	fmt.Fprintf(s.w, "event: message\ndata: %s\n\n", b)
	s.flush()
}

func (s *sseWriter) flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *sseWriter) progress(k, n int, msg string) {
	s.event(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{
		"progressToken": s.token, "progress": k, "total": n, "message": msg,
	}})
}

// respond sends the final response on the stream; an error keeps its
// in-band form (the HTTP status is already 200).
func (s *sseWriter) respond(id json.RawMessage, result any, e *rpcError) {
	if e != nil {
		s.event(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
		return
	}
	s.event(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}
