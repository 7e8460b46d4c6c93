package taskproxy

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// opaqueDialError is a real refused connection, wrapped as reverse_proxy
// wraps it: in a type that does not unwrap.
type opaqueDialError struct{ error }

// markedUnreachable is the Caddy glue's mark on reverse_proxy's dial
// errors (caddymodule's unreachableError).
type markedUnreachable struct{ error }

func (e markedUnreachable) Unwrap() error     { return e.error }
func (e markedUnreachable) Unreachable() bool { return true }

// panickedNext is what the next handler's panic comes back as.
func panickedNext(t *testing.T, v any) error {
	t.Helper()
	err := upstream.ServeNextRecovering(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic(v) }),
		httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil))
	if err == nil {
		t.Fatal("a panicking handler returned no error")
	}
	return err
}

func refusedDial(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, err = net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		t.Fatal("dialing a closed port succeeded")
	}
	return err
}

var refPattern = regexp.MustCompile(`\(ref ([0-9a-f]{12})\)`)

// Internal error text never reaches the client: it gets a generic message
// with a reference, and the log has the details under that reference.
func TestInternalErrorsHideDetails(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	g := &Gateway{env: &wire.Env{Log: zap.New(core)}}
	dial := refusedDial(t)
	hexDump := fmt.Errorf("committing: %w", task.CleanStoreError(errors.New("Value with size 2097152 exceeded 1048576 limit. Value:\n00000000  7b 22 6f 77 6e 65 72 22  |{\"owner\"|")))
	tests := []struct {
		name    string
		got     *jsonrpc.Error
		want    string   // the client's message starts with it
		secrets []string // none may appear in the client's message
		logged  bool     // the details are in the log under the ref
	}{
		{"store error", g.env.StoreFailure(errors.New("reading task abc: badger: corrupt value log at /var/lib/x")), "internal error (ref ", []string{"badger", "/var/lib"}, true},
		{"store hex dump", g.env.StoreFailure(hexDump), "internal error (ref ", []string{"owner", "7b 22", "Value with size"}, true},
		{"dial error", rpcerr.UpstreamFailure(g.env.Log, fmt.Errorf("calling the upstream: %w", &upstream.NextError{Err: markedUnreachable{opaqueDialError{dial}}})), "upstream unreachable (ref ", []string{"127.0.0.1", "dial", "refused"}, true},
		{"next handler's error", rpcerr.UpstreamFailure(g.env.Log, fmt.Errorf("calling the upstream: %w", &upstream.NextError{Err: opaqueDialError{dial}})), "upstream call failed (ref ", []string{"127.0.0.1", "dial", "refused"}, true},
		{"unwrapping dial error", rpcerr.UpstreamFailure(g.env.Log, fmt.Errorf("calling the upstream: %w", dial)), "upstream unreachable (ref ", []string{"127.0.0.1"}, true},
		{"panic", rpcerr.UpstreamFailure(g.env.Log, fmt.Errorf("calling upstream: %w", panickedNext(t, "runtime error at 0xdeadbeef"))), "upstream call failed (ref ", []string{"0xdeadbeef"}, true},
		{"protocol account kept", rpcerr.UpstreamFailure(g.env.Log, errors.New("the upstream ended its answer without a response to the call")), "the upstream ended its answer without a response", nil, false},
		{"expiry kept", rpcerr.UpstreamFailure(g.env.Log, fmt.Errorf("calling upstream: %w", rpcerr.ErrTaskExpired)), "task expired before completion", nil, false},
		{"store refusal kept", rpcerr.ClientError(g.env.Log, "x", fmt.Errorf("%w: working to completed", task.ErrBadTransition)), "task status transition not allowed", nil, false},
		{"JSON-RPC error as is", rpcerr.ClientError(g.env.Log, "x", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "bad")), "bad", nil, false},
	}
	for _, tt := range tests {
		msg := tt.got.Message
		if !strings.HasPrefix(msg, tt.want) {
			t.Errorf("%s: client message %q, want it to start with %q", tt.name, msg, tt.want)
		}
		for _, s := range tt.secrets {
			if strings.Contains(msg, s) {
				t.Errorf("%s: client message %q holds %q", tt.name, msg, s)
			}
		}
		if !tt.logged {
			continue
		}
		m := refPattern.FindStringSubmatch(msg)
		if m == nil {
			t.Errorf("%s: no ref in %q", tt.name, msg)
			continue
		}
		found := logs.FilterField(zap.String("ref", m[1])).All()
		if len(found) != 1 {
			t.Errorf("%s: %d log entries with ref %s, want 1", tt.name, len(found), m[1])
			continue
		}
		if e, ok := found[0].ContextMap()["error"].(string); !ok || e == "" || strings.Contains(e, "7b 22") {
			t.Errorf("%s: logged error %q: want the details, without record bytes", tt.name, e)
		}
	}
}
