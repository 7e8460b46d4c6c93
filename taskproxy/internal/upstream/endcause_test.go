package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// When the gateway ends an upstream call itself, the next handler's request
// context ends with the gateway's cause before the answer's head, and as a
// complete answer (io.EOF) once the handler has written it: a proxy reading
// the upstream's body then ends cleanly instead of logging an aborted
// answer. The gateway's own context keeps its cause.
func TestEndCauseOfACallTheGatewayEnds(t *testing.T) {
	t.Parallel()
	runTimeout := errors.New("run timeout")
	tests := []struct {
		name      string
		writeHead bool
		want      error
	}{
		{"before the head", false, runTimeout},
		{"while the answer streams", true, io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			run, cancel := context.WithCancelCause(context.Background())
			// A task's run detaches its requests from the client's.
			run = WithDetach(run, func(r *http.Request) *http.Request {
				return r.WithContext(context.WithoutCancel(r.Context()))
			})
			started, seen := make(chan struct{}), make(chan error, 1)
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.writeHead {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
				}
				close(started)
				<-r.Context().Done()
				seen <- context.Cause(r.Context())
			})
			base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			req := NewRequest(run, base, []byte(`{}`))
			called := make(chan struct{})
			go func() {
				defer close(called)
				if resp, err := Call(next, req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
				}
			}()
			<-started
			cancel(runTimeout)
			if got := <-seen; !errors.Is(got, tt.want) {
				t.Errorf("the next handler's request ended with %v, want %v", got, tt.want)
			}
			<-called
			if got := context.Cause(run); !errors.Is(got, runTimeout) {
				t.Errorf("the run's cause is %v", got)
			}
		})
	}
}
