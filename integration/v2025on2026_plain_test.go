package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// A 2025-11-25 client's plain tools/call of a tool the 2026-07-28 task
// runtime runs only as a task, through the reverse version bridge: the
// gateway calls again declaring the tasks extension and waits for the
// upstream's task within the call. That task runs for the caller as a
// gateway task would: admitted under max_active_per_principal, bounded by
// run_timeout, audited, and cancelled when nobody waits for it, even when
// the client leaves before the upstream names it.

// reverseGatewayWith is reverseGateway with more directives.
func reverseGatewayWith(t *testing.T, directives string) (*taskruntime.Server, *gateway) {
	t.Helper()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")
	return rt, startGateway(t, gatewayOptions{Upstream: addr, Directives: hmacAuth + directives})
}

// TestReverseBridgePlainClientLeavesBeforeCreateResult: the upstream holds
// the CreateTaskResult of the bridge's call declaring the extension; the
// 2025-11-25 client leaves meanwhile. The bridge reads on, and once the
// answer names the upstream's task, cancels it: nobody waits for it.
func TestReverseBridgePlainClientLeavesBeforeCreateResult(t *testing.T) {
	t.Parallel()
	rt, gw := reverseGatewayWith(t, "")
	alice := reverseClient(t, gw, "leaver")
	alice.initialize("")
	rt.HoldAnswers(taskruntime.ToolSteps)
	body, _ := jsonrpc.RequestBytes(json.RawMessage("5"), "tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": longSteps()})
	ctx, leave := context.WithCancel(context.Background())
	leaveBeforeCreateResult(t, rt, alice.newRequest(ctx, body), leave)
	waitFor(t, 30*time.Second, "the plain call's slot given back", func() bool { return plainCalls(t, gw) == 0 })
}

// TestReverseBridgePlainCallsWithinQuota: ten concurrent plain calls of
// the task-only steps tool under max_active_per_principal 3: three are
// admitted and make upstream tasks, seven are refused with -32000 before
// the upstream makes any; the admitted ones get their results, and each
// upstream task is audited, made and ended.
func TestReverseBridgePlainCallsWithinQuota(t *testing.T) {
	t.Parallel()
	rt, gw := reverseGatewayWith(t, "max_active_per_principal 3")
	alice := reverseClient(t, gw, "plenty")
	alice.initialize("")
	rt.Hold(taskruntime.ToolSteps, 1)
	t.Cleanup(func() { rt.ReleaseAll(taskruntime.ToolSteps) })
	const calls, limit = 10, 3
	answers := make(chan *jsonrpc.Message, calls)
	for i := range calls {
		c := &rpcClient{t: t, url: alice.url, session: alice.session, version: alice.version, header: alice.header, nextID: 100 * (i + 1)}
		go func() {
			answers <- c.call("tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": map[string]any{"steps": 2, "stepMs": 0}})
		}()
	}
	hang := time.After(60 * time.Second)
	next := func(what string) *jsonrpc.Message {
		t.Helper()
		select {
		case m := <-answers:
			return m
		case <-hang:
			t.Fatalf("no answer %s within a minute (upstream tasks created: %d)", what, rt.TasksCreated(taskruntime.ToolSteps))
		}
		return nil
	}
	for i := range calls - limit {
		if m := next("refusing a call over the bound"); m.Error == nil || m.Error.Code != -32000 {
			t.Fatalf("answer %d while %d calls hold upstream tasks: %s, want -32000", i+1, limit, show(m))
		}
	}
	waitFor(t, 30*time.Second, "the admitted calls' upstream tasks", func() bool { return rt.TasksCreated(taskruntime.ToolSteps) >= limit })
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != limit {
		t.Fatalf("upstream tasks created: %d, want %d", n, limit)
	}
	if n := plainCalls(t, gw); n != limit {
		t.Errorf("admin stores: %d plain calls, want %d", n, limit)
	}
	rt.ReleaseAll(taskruntime.ToolSteps)
	for range limit {
		if m := next("of an admitted call"); m.Error != nil || !strings.Contains(string(m.Result), "Completed 2 steps") {
			t.Errorf("admitted call: %s, want its result", show(m))
		}
	}
	waitFor(t, 30*time.Second, "the plain calls' audit lines", func() bool {
		return auditLines(t, gw, "plain call's task created at the upstream", "working") == limit &&
			auditLines(t, gw, "plain call's upstream task ended", "completed") == limit && plainCalls(t, gw) == 0
	})
}

// TestReverseBridgePlainCallRunTimeout: under run_timeout 1s, a plain call
// of a task-only tool that would run for minutes fails with the
// run-timeout error, as a task would, and the upstream's task is
// cancelled and audited as failed.
func TestReverseBridgePlainCallRunTimeout(t *testing.T) {
	t.Parallel()
	rt, gw := reverseGatewayWith(t, "run_timeout 1s")
	alice := reverseClient(t, gw, "slowpoke")
	alice.initialize("")
	m := alice.call("tools/call", map[string]any{"name": taskruntime.ToolSteps, "arguments": longSteps()})
	if m.Error == nil || m.Error.Code != -32603 || !strings.Contains(m.Error.Message, "run_timeout") {
		t.Fatalf("plain call past its run_timeout: %s, want -32603 naming run_timeout", show(m))
	}
	ids := rt.TaskIDs(taskruntime.ToolSteps)
	if len(ids) != 1 {
		t.Fatalf("upstream steps tasks %v, want 1", ids)
	}
	waitUpstreamCancelled(t, rt, ids[0])
	waitFor(t, 30*time.Second, "the audit line of the upstream task's end", func() bool {
		return auditLines(t, gw, "plain call's upstream task ended", "failed") == 1 && plainCalls(t, gw) == 0
	})
}

// show is a message as the client got it.
func show(m *jsonrpc.Message) string {
	if m.Error != nil {
		return fmt.Sprintf("error %d %s", m.Error.Code, m.Error.Message)
	}
	return string(m.Result)
}
