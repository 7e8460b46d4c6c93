package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// The official 2026-07-28 requester (@modelcontextprotocol/ext-tasks over
// @modelcontextprotocol/client) through the real ./caddy (Badger) in front
// of the task runtime fixture: the same script as
// TestTaskRuntimeExtTasksClient, which drives the fixture directly, so that
// what differs is what the gateway does.

// runTaskRuntimeClient runs testdata/taskruntime-client.mjs in mode against
// url, with the fixture's observer API (to release the steps task held at
// step 2 once the client has seen it there; "" when nothing is held).
func runTaskRuntimeClient(t *testing.T, url, mode, control string) string {
	t.Helper()
	args := []string{url, mode}
	if control != "" {
		args = append(args, control)
	}
	return runNodeClientArgs(t, "ext-tasks-"+extTasksVersion+"-client-"+mcpClientVersion, "taskruntime-client.mjs", args,
		"@modelcontextprotocol/ext-tasks@"+extTasksVersion, "@modelcontextprotocol/client@"+mcpClientVersion)
}

// clientTaskIDs returns the task ids the client printed, by tool ("cancel"
// for the cancelled one), in order.
func clientTaskIDs(t *testing.T, out string) map[string][]string {
	t.Helper()
	ids := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^(\w+) TASK (\S+)$`).FindAllStringSubmatch(out, -1) {
		if m[2] != "-" {
			ids[m[1]] = append(ids[m[1]], m[2])
		}
	}
	if m := regexp.MustCompile(`(?m)^CANCEL KIND task TASK (\S+)$`).FindStringSubmatch(out); m != nil {
		ids["cancel"] = []string{m[1]}
	}
	return ids
}

// checkFollowed checks that each task id the client got through the gateway
// is the gateway's own, not the upstream's, and that the gateway followed
// an upstream task of the same tool with tasks/get carrying the Mcp-Name
// the fixture insists on; it returns the upstream ids by the client's.
func checkFollowed(t *testing.T, rt *taskruntime.Server, gw *gateway, ids map[string][]string) map[string]string {
	t.Helper()
	up := map[string]string{}
	for tool, list := range ids {
		for _, id := range list {
			if _, ok := rt.Task(id); ok {
				t.Errorf("%s: the client got the upstream's task id %s, want the gateway's", tool, id)
				continue
			}
			upID := followedUpstreamID(t, gw, id)
			v, ok := rt.Task(upID)
			want := tool
			if tool == "cancel" {
				want = taskruntime.ToolSteps
			}
			if !ok || v.Tool != want {
				t.Errorf("%s: gateway task %s follows %q, which the fixture does not know as a %s task", tool, id, upID, want)
				continue
			}
			if rt.Gets(upID) == 0 {
				t.Errorf("%s: the gateway never read upstream task %s with tasks/get", tool, upID)
			}
			up[id] = upID
		}
	}
	return up
}

// TestFollowV2026ExtTasksClient: the official requester through the
// gateway. Every task it gets is the gateway's, following one at the
// upstream: polled to completion while "step 2 of 4" (the upstream's
// progress, as statusMessage) shows; three input requests (two at once,
// then one) under the gateway's keys, answered with tasks/update; a failed
// and a tool-error task; a forbidden tool answered at once; a cancel that
// reaches the upstream task; and, without the extension, the task-only
// tool's result on the call itself (the fixture alone refuses it -32021).
func TestFollowV2026ExtTasksClient(t *testing.T) {
	t.Parallel()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
	rt.Hold(taskruntime.ToolSteps, 2)
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")})

	out := runTaskRuntimeClient(t, gw.URL, "full", taskRuntimeControlURL(url))
	for _, want := range []string{
		"ERA modern",
		"TOOLS steps,interview,echo,fail_job",
		"steps KIND task OUTCOME completed", "Completed 4 steps for ts",
		`INPUT color elicitation "What is your favourite colour?"`,
		`INPUT name elicitation "What is your name?"`,
		`INPUT save elicitation "Save the profile of Lin?"`,
		"interview KIND task OUTCOME completed", "Hello Lin, you like green; saved: true",
		"fail_job ERROR -32603 Simulated failure after 1 steps",
		"fail_job KIND task OUTCOME completed", `"text":"Job failed: simulated tool error"}],"isError":true`,
		"echo KIND immediate OUTCOME completed", "echo: hi",
		"CANCEL KIND task",
		"LIB MCP-NAME tasks/cancel,tasks/get,tasks/update",
		"PLAIN steps RESULT", "Completed 1 steps for plain",
		"PLAIN fail_job RESULT", "Job failed: simulated tool error",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("client output lacks %q", want)
		}
	}
	if !regexp.MustCompile(`steps STATUS MESSAGES \[[^\n]*"step 2 of 4"`).MatchString(out) {
		t.Error(`the client never saw "step 2 of 4" while the upstream task was held there`)
	}
	// The gateway's input keys, not the upstream's (which are the property
	// names).
	for _, m := range regexp.MustCompile(`(?m)^INPUT (\w+) elicitation .* KEY (\S+)$`).FindAllStringSubmatch(out, -1) {
		if m[1] == m[2] {
			t.Errorf("input request %s reached the client under the upstream's key", m[1])
		}
	}

	ids := clientTaskIDs(t, out)
	for tool, n := range map[string]int{"steps": 1, "interview": 1, "fail_job": 2, "cancel": 1} {
		if len(ids[tool]) != n {
			t.Errorf("the client reported %d %s tasks, want %d", len(ids[tool]), tool, n)
		}
	}
	up := checkFollowed(t, rt, gw, ids)
	if len(ids["cancel"]) == 1 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		v, err := rt.WaitTask(ctx, up[ids["cancel"][0]], func(v taskruntime.TaskView) bool { return v.Status.Terminal() })
		if err != nil || v.Status != taskruntime.StatusCancelled || !v.CancelRequested {
			t.Errorf("the cancelled task's upstream task ended %s (cancel requested %v, %v), want cancelled", v.Status, v.CancelRequested, err)
		}
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{
		// steps: the task, the cancelled one, and the plain client's call
		// (the gateway makes it a task upstream and waits for it).
		{"steps tasks at the upstream", rt.TasksCreated(taskruntime.ToolSteps), 3},
		{"interview tasks at the upstream", rt.TasksCreated(taskruntime.ToolInterview), 1},
		{"fail_job tasks at the upstream", rt.TasksCreated(taskruntime.ToolFailJob), 2},
		{"echo tasks at the upstream", rt.TasksCreated(taskruntime.ToolEcho), 0},
		{"cancels of steps at the upstream", rt.CancelRequests(taskruntime.ToolSteps), 1},
		{"header mismatches at the upstream", rt.Rejections(taskruntime.CodeHeaderMismatch), 0},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.what, c.got, c.want)
		}
	}
}

// TestFollowV2026ClientWithoutMcpName: the same client sending tasks/get,
// tasks/update and tasks/cancel without Mcp-Name, as FastMCP's tasks client
// does. With the default (lenient) routing headers the gateway takes the
// name from params.taskId and every flow works, the upstream still getting
// the header it requires; with routing_headers strict the first tasks/get
// is refused with HTTP 400 / -32020 by the gateway, and the upstream never
// sees a request without it either way.
func TestFollowV2026ClientWithoutMcpName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, directives string
		want, absent     []string
		cancels          int
	}{{
		name: "lenient",
		want: []string{
			"steps KIND task OUTCOME completed", "Completed 4 steps for ts", `"step 2 of 4"`,
			`INPUT save elicitation "Save the profile of Lin?"`,
			"interview KIND task OUTCOME completed", "Hello Lin, you like green; saved: true",
			"CANCEL KIND task", "CANCEL RESULT",
		},
		absent:  []string{"HTTP 400"},
		cancels: 1,
	}, {
		name:       "strict",
		directives: "routing_headers strict",
		want: []string{
			"HTTP 400 tasks/get -32020",
			"steps ERROR -32020", "interview ERROR -32020",
			"HTTP 400 tasks/cancel -32020",
		},
		absent: []string{"OUTCOME completed", "INPUT"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
			control := ""
			if tc.cancels > 0 {
				rt.Hold(taskruntime.ToolSteps, 2)
				control = taskRuntimeControlURL(url)
			}
			gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp"), Directives: tc.directives})
			out := runTaskRuntimeClient(t, gw.URL, "omit-name", control)
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("client output lacks %q", want)
				}
			}
			for _, bad := range tc.absent {
				if strings.Contains(out, bad) {
					t.Errorf("client output has %q", bad)
				}
			}
			// The tasks were made and followed either way: only the
			// client's own requests were refused.
			checkFollowed(t, rt, gw, clientTaskIDs(t, out))
			if n := rt.CancelRequests(taskruntime.ToolSteps); n != tc.cancels {
				t.Errorf("cancels of steps at the upstream: %d, want %d", n, tc.cancels)
			}
			if n := rt.Rejections(taskruntime.CodeHeaderMismatch); n != 0 {
				t.Errorf("the fixture refused %d requests for their headers", n)
			}
		})
	}
}

// TestFollowV2026TSSDKv1Client: the official TypeScript SDK v1 client
// (2025-11-25) through the gateway in front of the task runtime fixture,
// which speaks only 2026-07-28 (FastMCP 4, unlike it, serves 2025-11-25
// sessions too) and refuses a 2025-11-25 initialize. The reverse version
// bridge answers the client's initialize itself and sends its requests on
// in 2026-07-28 form: the client connects, lists the fixture's tools,
// calls a plain one, one the fixture runs only as a task (its result on
// the call), one that fails, the task-only one again as a task of its own
// (the gateway's task following the fixture's), pings and ends its
// session.
func TestFollowV2026TSSDKv1Client(t *testing.T) {
	t.Parallel()
	rt, url := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/mcp")})
	out := runNodeClientArgs(t, "ts-sdk-"+tsSDKVersion, "ts-sdk-plain-client.mjs", []string{gw.URL,
		`echo={"text":"from ts"}`, `steps={"steps":3,"stepMs":10,"label":"ts"}`, `fail_job={"kind":"tool","steps":1,"stepMs":0}`,
		`task:steps={"steps":2,"stepMs":10,"label":"ts task"}`},
		"@modelcontextprotocol/sdk@"+tsSDKVersion)
	for _, want := range []string{
		"CONNECTED", "session yes",
		"TOOLS echo fail_job guarded interview steps",
		`CALL echo OK "echo: from ts"`,
		`CALL steps OK "Completed 3 steps for ts"`,
		`CALL fail_job TOOL ERROR "Job failed: simulated tool error"`,
		`SERVER TASKS {"cancel":{},"requests":{"tools":{"call":{}}}}`,
		"TASK steps CREATED working", `TASK steps RESULT "Completed 2 steps for ts task"`,
		"PING OK", "TERMINATED",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("client output lacks %q", want)
		}
	}
	if n := rt.Rejections(taskruntime.CodeUnsupportedVersion); n != 0 {
		t.Errorf("the fixture refused %d requests with -32022, want none", n)
	}
	if n := rt.TasksCreated(taskruntime.ToolSteps); n != 2 {
		t.Errorf("the fixture made %d steps tasks, want the one the gateway awaited and the one it followed", n)
	}
}
