package runtime

import (
	"io"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// auditRoute returns a route whose audit log goes to core.
func auditRoute(t testing.TB, core zapcore.Core) *Route {
	t.Helper()
	rt := New(newMemStore(t), nil, nil)
	t.Cleanup(func() { _ = rt.Close(time.Second) })
	return rt.NewRoute(RouteConfig{Name: "a", Logger: zap.NewNop(), AuditLogger: zap.New(core)})
}

// Reads of a state already read by the same owner go to debug level; what
// changes a task, a new state, another owner's read and every denial stay
// at info.
func TestAuditLevels(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	route := auditRoute(t, core)
	working := &task.Task{ID: "t1", Owner: "alice", Principal: "alice", Tool: "x", Status: task.StatusWorking, CreatedAt: Now()}
	done := *working
	done.Status = task.StatusCompleted
	alice, bob := task.Caller{Owner: "alice", Principal: "alice"}, task.Caller{Owner: "bob", Principal: "bob"}
	steps := []struct {
		name  string
		event string
		t     *task.Task
		who   task.Caller
		want  zapcore.Level
	}{
		{"created", AuditCreated, working, alice, zapcore.InfoLevel},
		{"first read of working", AuditRetrieved, working, alice, zapcore.InfoLevel},
		{"second read of working", AuditRetrieved, working, alice, zapcore.DebugLevel},
		{"third read of working", AuditRetrieved, working, alice, zapcore.DebugLevel},
		{"denial", AuditDenied, nil, bob, zapcore.InfoLevel},
		{"denial again", AuditDenied, nil, bob, zapcore.InfoLevel},
		{"completed", auditCompleted, &done, alice, zapcore.InfoLevel},
		{"first read of the result", AuditRetrieved, &done, alice, zapcore.InfoLevel},
		{"poll of the result", AuditRetrieved, &done, alice, zapcore.DebugLevel},
		{"another owner's first read", AuditRetrieved, &done, bob, zapcore.InfoLevel},
	}
	for i, s := range steps {
		route.Audit(s.event, "t1", s.t, s.who)
		all := logs.All()
		if len(all) != i+1 {
			t.Fatalf("%s: %d lines, want %d", s.name, len(all), i+1)
		}
		if got := all[i]; got.Message != s.event || got.Level != s.want {
			t.Errorf("%s: %q at %s, want %q at %s", s.name, got.Message, got.Level, s.event, s.want)
		}
	}
}

// The set of first reads stays bounded: after two generations of other
// reads, a read is forgotten and audited at info once more.
func TestAuditReadSetBounded(t *testing.T) {
	t.Parallel()
	var s readSet
	k := readKey{task: "t", owner: "o", status: task.StatusCompleted}
	if !s.first(k) || s.first(k) {
		t.Fatal("first read not new, or a repeat new")
	}
	for i := range 2 * readGeneration {
		s.first(readKey{task: string(rune(i)), owner: "other"})
	}
	if n := len(s.cur) + len(s.prev); n > 2*readGeneration {
		t.Errorf("%d keys held, bound %d", n, 2*readGeneration)
	}
	if !s.first(k) {
		t.Error("a read two generations old is still remembered")
	}
}

// BenchmarkAudit measures one audit event: encoded as Caddy's default
// logger does (JSON) into io.Discard at info level, and a repeated poll
// whose debug line is disabled.
func BenchmarkAudit(b *testing.B) {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	t := &task.Task{ID: "Dq2Xl6AqS1u5fYJm8mvq8g", Owner: "alice", Principal: "alice", Tenant: "t1", Tool: "fast", Status: task.StatusCompleted, CreatedAt: Now()}
	who := task.Caller{Owner: "alice", Principal: "alice", Tenant: "t1"}
	cases := []struct {
		name  string
		level zapcore.Level
		event string
	}{
		{"created/info-enabled", zapcore.InfoLevel, AuditCreated},
		{"repeated-poll/debug-disabled", zapcore.InfoLevel, AuditRetrieved},
		{"created/log-silenced", zapcore.WarnLevel, AuditCreated},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			route := auditRoute(b, zapcore.NewCore(enc, zapcore.AddSync(io.Discard), c.level))
			route.Audit(c.event, t.ID, t, who) // the first read, at info
			b.ReportAllocs()
			for b.Loop() {
				route.Audit(c.event, t.ID, t, who)
			}
		})
	}
}

// An audit line of a task created in a trace names that trace; a task
// created untraced, or one with a malformed stored context, names none.
func TestAuditTraceIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		parent        string
		trace, spanID string
	}{
		{"traced", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"},
		{"untraced", "", "", ""},
		{"malformed", "00-xyz-00f067aa0ba902b7-01", "", ""},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.InfoLevel)
			route := auditRoute(t, core)
			route.AuditTask(AuditCreated, &task.Task{ID: "t1", Owner: "alice", Tool: "x", Status: task.StatusWorking, CreatedAt: Now(), TraceParent: tt.parent})
			all := logs.All()
			if len(all) != 1 {
				t.Fatalf("%d audit lines, want 1", len(all))
			}
			fields := all[0].ContextMap()
			gotTrace, hasTrace := fields["trace_id"]
			gotSpan, hasSpan := fields["span_id"]
			if tt.trace == "" {
				if hasTrace || hasSpan {
					t.Fatalf("audit line has trace_id %v span_id %v, want none", gotTrace, gotSpan)
				}
				return
			}
			if gotTrace != tt.trace || gotSpan != tt.spanID {
				t.Fatalf("audit line has trace_id %v span_id %v, want %s %s", gotTrace, gotSpan, tt.trace, tt.spanID)
			}
		})
	}
}

// A failed task's audit lines say why, as the class the metrics use, never
// with the failure's message (which may quote the tool); other states
// carry no reason.
func TestAuditFailureReason(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status task.Status
		err    string
		want   string // "" for no reason field
	}{
		{"run timeout", task.StatusFailed, RunTimeoutMessage(time.Minute), string(task.FailRunTimeout)},
		{"the upstream's error", task.StatusFailed, "secret detail the tool said", string(task.FailUpstreamError)},
		{"a result marked isError", task.StatusFailed, "", string(task.FailToolError)},
		{"completed", task.StatusCompleted, "", ""},
		{"cancelled", task.StatusCancelled, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.InfoLevel)
			route := auditRoute(t, core)
			tk := &task.Task{ID: "t1", Owner: "alice", Principal: "alice", Tool: "x", Status: tt.status, CreatedAt: Now()}
			if tt.err != "" {
				tk.Error = jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", tt.err)
			}
			route.AuditOutcome(tk)
			all := logs.All()
			if len(all) != 1 {
				t.Fatalf("%d audit lines, want 1", len(all))
			}
			fields := all[0].ContextMap()
			got, has := fields["reason"]
			switch {
			case tt.want == "" && has:
				t.Errorf("audit line %q has reason %v, want none", all[0].Message, got)
			case tt.want != "" && got != tt.want:
				t.Errorf("audit line %q has reason %v, want %s", all[0].Message, got, tt.want)
			}
			for k, v := range fields {
				if s, ok := v.(string); ok && tt.err != "" && k != "reason" && s == tt.err {
					t.Errorf("audit line holds the failure's message in %s", k)
				}
			}
		})
	}
}
