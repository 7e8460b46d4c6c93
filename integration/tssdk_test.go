package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tsSDKVersion is the official TypeScript SDK whose experimental tasks
// client drives TestTypeScriptSDKClient.
const tsSDKVersion = "1.32.2"

// TestTypeScriptSDKClient runs the 2025-11-25 task flows with an independent
// client: the official TypeScript SDK, installed from npm by the test. It
// task-augments calls itself when the gateway advertises task support, polls
// tasks/get, reads the result with tasks/result, and answers the
// elicitation relayed on that stream.
func TestTypeScriptSDKClient(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})
	out := runNodeClient(t, "ts-sdk-"+tsSDKVersion, "ts-sdk-client.mjs", gw.URL, "@modelcontextprotocol/sdk@"+tsSDKVersion)
	for _, want := range []string{
		`SERVER CAPS {"cancel":{},"requests":{"tools":{"call":{}}}}`,
		"slow_compute:optional", "failing_job:required", "greet:forbidden",
		"slow_compute STATUS completed",
		`slow_compute RESULT {"_meta":{"io.modelcontextprotocol/related-task"`,
		"Computed ts in 1.5s",
		"failing_job STATUS failed",
		`ELICIT "Delete ts.txt?"`,
		"Deleted ts.txt",
		"protocol_error_job STATUS failed",
		"LIST {\"err\":\"MCP error -32601",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("client output lacks %q", want)
		}
	}
}

// Versions of the official 2026-07-28 requester library and its client.
const (
	extTasksVersion  = "0.2.2"
	mcpClientVersion = "2.4.0"
)

// TestExtTasksClient runs the 2026-07-28 task flows with the official
// requester library: server-directed tasks, input through tasks/update
// (one and two requests at once), multi-round-trip before a required
// tool's task, a tool error completing, and a JSON-RPC error passing
// through.
func TestExtTasksClient(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + "tool test_tool_with_task required"})
	out := runNodeClient(t, "ext-tasks-"+extTasksVersion+"-client-"+mcpClientVersion, "ext-tasks-client.mjs", gw.URL,
		"@modelcontextprotocol/ext-tasks@"+extTasksVersion, "@modelcontextprotocol/client@"+mcpClientVersion)
	for _, want := range []string{
		"ERA modern",
		"greet OUTCOME completed", "Hello, ext!",
		"slow_compute OUTCOME completed", "Computed ext in 1.5s",
		`failing_job OUTCOME completed {"resultType":"complete","content":[{"type":"text","text":"Job failed: simulated failure"}],"isError":true`,
		`INPUT elicitation "Delete ext.txt?"`, "Deleted ext.txt",
		"Hello Ext, you like blue",
		"Hello, Ext! Task completed.",
		"protocol_error_job ERROR -32603 Simulated protocol error",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("client output lacks %q", want)
		}
	}
	// Which calls the gateway made tasks of, from its audit log (only task
	// events name a tool there).
	for tool, task := range map[string]bool{"slow_compute": true, "failing_job": true, "confirm_delete": true,
		"multi_input": true, "test_tool_with_task": true, "greet": false, "protocol_error_job": false} {
		if created := strings.Contains(gw.logs(), `"tool":"`+tool+`"`); created != task {
			t.Errorf("%s: task created = %v, want %v", tool, created, task)
		}
	}
}

// runNodeClient installs the npm packages (once, into the cache directory
// named dirName), puts the testdata script beside them, and runs it with
// Node 22 against url, returning its output. A failing client fails the
// test.
func runNodeClient(t *testing.T, dirName, script, url string, packages ...string) string {
	t.Helper()
	return runNodeClientArgs(t, dirName, script, []string{url}, packages...)
}

// runNodeClientArgs is runNodeClient with the script's arguments given
// whole (the URL first).
func runNodeClientArgs(t *testing.T, dirName, script string, args []string, packages ...string) string {
	t.Helper()
	_, env := conformanceCLI(t, conformanceStableVersion) // Node 22 on PATH
	installMu.Lock()
	dir := filepath.Join(mcpTestingCacheDir(t), dirName)
	ensureInstalled(t, dir, func(tmp string) error { return npmInstall(env, tmp, packages...) })
	installMu.Unlock()
	code, err := os.ReadFile(filepath.Join("testdata", script))
	if err != nil {
		t.Fatal(err)
	}
	// Beside its node_modules, in a file of this run's own: tests running
	// at once use the same install, with the same script too (a shared
	// file, rewritten by one while another's node read it, was read empty:
	// that client ran nothing and printed nothing).
	f, err := os.CreateTemp(dir, "run-*-"+script)
	if err != nil {
		t.Fatal(err)
	}
	run := f.Name()
	t.Cleanup(func() { _ = os.Remove(run) })
	if _, err := f.Write(code); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	node, err := lookPathIn("node", env)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCmd(2*time.Minute, env, dir, node, append([]string{run}, args...)...)
	t.Logf("%s:\n%s", script, out)
	if err != nil {
		t.Fatalf("client failed: %v", err)
	}
	return out
}
