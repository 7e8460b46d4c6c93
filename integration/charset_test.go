package integration

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tsExpressUpstreamScript is a TypeScript SDK server built as the SDK's own
// documentation builds one: createMcpExpressApp, whose express.json() decodes
// the body in the charset the Content-Type names (any "utf-*" iconv-lite
// knows, UTF-7 included) and inflates a Content-Encoding, and a stateless
// transport handed the parsed body. It appends to RUNS_FILE each time
// dangerous_tool runs.
const tsExpressUpstreamScript = `
const sdk = process.env.SDK_DIR + "/dist/cjs/server/";
const { createMcpExpressApp } = require(sdk + "express.js");
const { McpServer } = require(sdk + "mcp.js");
const { StreamableHTTPServerTransport } = require(sdk + "streamableHttp.js");
const fs = require("fs");
const app = createMcpExpressApp();
app.post("/mcp", async (req, res) => {
  const server = new McpServer({ name: "ts-express-upstream", version: "1.0.0" });
  server.registerTool("safe_tool", { description: "harmless" }, async () => ({ content: [{ type: "text", text: "safe" }] }));
  server.registerTool("dangerous_tool", { description: "counted" }, async () => {
    fs.appendFileSync(process.env.RUNS_FILE, "x");
    return { content: [{ type: "text", text: "dangerous ran" }] };
  });
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => { transport.close(); server.close(); });
  await server.connect(transport);
  await transport.handleRequest(req, res, req.body);
});
app.listen(Number(process.env.PORT), "127.0.0.1");
`

// tsExpressUpstream starts tsExpressUpstreamScript with the TypeScript SDK
// that server-everything installs; it returns its address and the count of
// dangerous_tool's runs so far.
func tsExpressUpstream(t *testing.T) (addr string, runs func() int) {
	t.Helper()
	dir, env := installTSEverything(t)
	node, err := lookPathIn("node", env)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	script, runsFile := filepath.Join(tmp, "upstream.cjs"), filepath.Join(tmp, "runs")
	if err := os.WriteFile(script, []byte(tsExpressUpstreamScript), 0o600); err != nil {
		t.Fatal(err)
	}
	addr = freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	startProcessEnv(t, append(pathOf(env), "PORT="+port, "RUNS_FILE="+runsFile,
		"SDK_DIR="+filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk")), addr, node, script)
	return addr, func() int {
		b, _ := os.ReadFile(runsFile)
		return len(b)
	}
}

// postTyped posts body on c's session with the Content-Type ct and returns
// the status and the answer.
func postTyped(t *testing.T, c *rpcClient, ct, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req := c.newRequest(ctx, []byte(body))
	req.Header.Set("Content-Type", ct)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

// A charset the upstream decodes the body in: in UTF-7 "+AG4-ame" is
// "name", so the TypeScript SDK behind express.json() runs the last "name",
// dangerous_tool, where the gateway read safe_tool's name.
func TestForeignCharsetRefused(t *testing.T) {
	t.Parallel()
	addr, runs := tsExpressUpstream(t)
	const body = `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"safe_tool","+AG4-ame":"dangerous_tool","arguments":{}}}`
	types := []string{
		"application/json; charset=utf-7",
		`application/json; charset="UTF-7"`,
		"application/json; charset=utf-8; charset=utf-7",
	}
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: "tool dangerous_tool required"})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	for _, ct := range types {
		if status, answer := postTyped(t, c, ct, body); status != http.StatusUnsupportedMediaType || !strings.Contains(answer, `"code":-32600`) {
			t.Errorf("%s: HTTP %d %s; want 415 with -32600", ct, status, answer)
		}
	}
	if n := runs(); n != 0 {
		t.Errorf("the upstream ran dangerous_tool %d times through the gateway", n)
	}
	for _, ct := range []string{"application/json; charset=utf-8", "application/json;charset=UTF-8"} {
		if status, answer := postTyped(t, c, ct, body[:strings.Index(body, `,"+AG4-ame"`)]+`,"arguments":{}}}`); status != http.StatusOK || !strings.Contains(answer, `"safe"`) {
			t.Errorf("%s: HTTP %d %s; want safe_tool's answer", ct, status, answer)
		}
	}

	t.Run("pass_unreadable runs it upstream", func(t *testing.T) {
		open := startGateway(t, gatewayOptions{Upstream: addr, Directives: "tool dangerous_tool required\npass_unreadable"})
		c := newRPCClient(t, open.URL)
		c.initialize("")
		before := runs()
		if status, answer := postTyped(t, c, types[0], body); !strings.Contains(answer, "dangerous ran") || runs() != before+1 {
			t.Errorf("HTTP %d %s; want dangerous_tool's answer (the probe is not what the SDK runs)", status, answer)
		}
	})
}
