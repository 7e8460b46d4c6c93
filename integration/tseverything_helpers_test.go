package integration

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// The official TypeScript test server, @modelcontextprotocol/server-everything
// (built on TS SDK v1): stateful 2025-11-25 sessions only, server-initiated
// elicitation and sampling over SSE, progress notifications, and one tool
// it runs as a task itself (simulate-research-query). Nobody here wrote
// it, which is the point: the gateway must work in front of it as it is.

// tsEverythingVersion pins the npm release the tests install.
const tsEverythingVersion = "2026.8.31"

// startTSEverything installs the TypeScript everything server (once, into
// the mcp-testing cache) and starts it on a free port; it returns the URL of
// its streamable HTTP endpoint. The server is killed at test cleanup.
func startTSEverything(t testing.TB) string {
	t.Helper()
	dir, env := installTSEverything(t)
	entry := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		t.Fatalf("server-everything %s: %v", tsEverythingVersion, err)
	}
	node, err := lookPathIn("node", env)
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	// It listens on every interface at PORT; the wait dials the loopback.
	startProcessEnv(t, append(pathOf(env), "PORT="+port), addr, node, entry, "streamableHttp")
	return "http://" + addr + "/mcp"
}

// pathOf returns the PATH entry of env, so that a process started with it
// finds Node 22 first.
func pathOf(env []string) []string {
	for _, kv := range env {
		if len(kv) > 5 && kv[:5] == "PATH=" {
			return []string{kv}
		}
	}
	return nil
}

// installTSEverything installs server-everything (and with it the
// TypeScript SDK it is built on) into the mcp-testing cache once, and
// returns its directory and an environment with Node 22 on PATH.
func installTSEverything(t testing.TB) (dir string, env []string) {
	t.Helper()
	_, env = conformanceCLI(t, conformanceStableVersion) // Node 22 on PATH
	installMu.Lock()
	defer installMu.Unlock()
	dir = filepath.Join(mcpTestingCacheDir(t), "server-everything-"+tsEverythingVersion)
	ensureInstalled(t, dir, func(tmp string) error {
		return npmInstall(env, tmp, "@modelcontextprotocol/server-everything@"+tsEverythingVersion)
	})
	return dir, env
}
