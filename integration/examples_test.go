package integration

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// The example Caddyfiles under examples/: each is what caddy fmt writes,
// adapts and validates with the real binary, and runs: a task's round trip
// through it against real upstreams. The examples read their addresses,
// directories and secrets from environment variables ({$VAR:default}), so
// the tests run them as they are.

// exampleFiles are the examples, each of which the tests below run.
var exampleFiles = []string{
	"single-node.Caddyfile",
	"jwt-jwks-tenants.Caddyfile",
	"postgres-replica.Caddyfile",
	"postgres-balancer.Caddyfile",
	"front-proxy.Caddyfile",
	"version-bridges.Caddyfile",
	"tracing.Caddyfile",
}

// exampleEnv is the environment of an example's Caddy: its own admin
// address, data directories and store; vars add or replace the example's
// variables.
func exampleEnv(t *testing.T, adminAddr string, vars ...string) []string {
	t.Helper()
	home := t.TempDir()
	return append([]string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"),
		"MCP_ADMIN=" + adminAddr, "MCP_STORAGE_DIR=" + filepath.Join(home, "store")}, vars...)
}

// runExample runs the real Caddy on an example with env, and waits until
// addr listens.
func runExample(t *testing.T, name, addr string, env []string) {
	t.Helper()
	startProcessEnv(t, env, addr, caddyBinary, "run", "--config", filepath.Join("examples", name), "--adapter", "caddyfile")
}

func portOf(addr string) string { return addr[strings.LastIndexByte(addr, ':')+1:] }

// waitReady waits for an example's stores to take tasks.
func waitReady(t *testing.T, adminAddr string) {
	t.Helper()
	waitFor(t, 60*time.Second, "the example's readiness", func() bool {
		code, _ := adminDo(t, adminAddr, http.MethodGet, "/mcp_tasks/health/ready", nil)
		return code == http.StatusOK
	})
}

// roundTrip makes a 2025-11-25 task of slow_compute through url as c's
// caller and waits for its result.
func roundTrip(t *testing.T, c *rpcClient, label string) string {
	t.Helper()
	c.initialize("")
	id := c.createTask("slow_compute", map[string]any{"seconds": 0.1, "label": label}, 60000).TaskID
	waitFor(t, 30*time.Second, "the task to complete", func() bool { return c.getTask(id).Status == "completed" })
	if m := c.call("tasks/result", map[string]string{"taskId": id}); m.Error != nil || !strings.Contains(string(m.Result), label) {
		t.Errorf("tasks/result through the example: %s %+v, want the result naming %q", m.Result, m.Error, label)
	}
	return id
}

// Every example is caddy fmt clean, and adapts and validates (caddy adapt
// --validate provisions every module) with the environment its run uses.
func TestExamplesFormatAndValidate(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir("examples")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		found = append(found, e.Name())
	}
	if want := slices.Sorted(slices.Values(exampleFiles)); !slices.Equal(found, want) {
		t.Errorf("examples/ holds %v, the tests know %v: a new example needs its test", found, want)
	}
	dsn, _ := testDatabase(t)
	jwks := jwksServer(t, newSigningKey(t))
	for _, name := range exampleFiles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join("examples", name)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(caddyBinary, "fmt", path).Output()
			if err != nil {
				t.Fatalf("caddy fmt: %v", err)
			}
			if string(out) != string(src) {
				t.Errorf("caddy fmt changes %s: run caddy fmt --overwrite %s\n%s", name, path, out)
			}
			cmd := exec.Command(caddyBinary, "adapt", "--config", path, "--adapter", "caddyfile", "--validate")
			cmd.Env = append(os.Environ(), exampleEnv(t, freeAddr(t), "MCP_TASKS_DSN="+dsn, "MCP_JWT_SECRET="+testHMACSecret,
				"MCP_JWKS_URL="+jwks, "MCP_REPLICAS="+freeAddr(t)+" "+freeAddr(t))...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("caddy adapt --validate %s: %v\n%s", name, err, out)
			}
		})
	}
}

// The single node example: a task's round trip against the go-sdk
// fixture, and the store's readiness.
func TestExampleSingleNode(t *testing.T) {
	t.Parallel()
	_, upAddr := testUpstream(t)
	addr, admin := freeAddr(t), freeAddr(t)
	runExample(t, "single-node.Caddyfile", addr, exampleEnv(t, admin, "MCP_PORT="+portOf(addr), "MCP_UPSTREAM="+upAddr))
	waitReady(t, admin)
	roundTrip(t, newRPCClient(t, "http://"+addr+"/mcp"), "single-node")
}

// The tracing example exporting OTLP over HTTP to a receiver of the
// test: a task's round trip through it is one trace, from the create to
// the task's run.
func TestExampleTracing(t *testing.T) {
	t.Parallel()
	rcv := startOTLPReceiver(t)
	_, upAddr := testUpstream(t)
	addr, admin := freeAddr(t), freeAddr(t)
	env := append(exampleEnv(t, admin, "MCP_PORT="+portOf(addr), "MCP_UPSTREAM="+upAddr), tracingEnv(rcv)...)
	runExample(t, "tracing.Caddyfile", addr, env)
	waitReady(t, admin)
	id := roundTrip(t, newRPCClient(t, "http://"+addr+"/mcp"), "tracing")
	create := rcv.await("mcp.task.create", "mcp.task.id", id)
	run := rcv.await("mcp.task.run", "mcp.task.id", id)
	if string(create.TraceId) != string(run.TraceId) {
		t.Errorf("the create's trace %x and the run's %x differ, want one trace", create.TraceId, run.TraceId)
	}
}

// The front proxy example behind a proxy that forwards the public Host
// and adds X-Forwarded-For: anonymous task calls under the public name go
// through, because the proxy is trusted.
func TestExampleFrontProxy(t *testing.T) {
	t.Parallel()
	_, upAddr := testUpstream(t)
	addr, admin := freeAddr(t), freeAddr(t)
	runExample(t, "front-proxy.Caddyfile", addr, exampleEnv(t, admin, "MCP_PORT="+portOf(addr), "MCP_UPSTREAM="+upAddr,
		"MCP_TRUSTED_PROXIES=127.0.0.1/32"))
	waitReady(t, admin)
	target, err := url.Parse("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = "mcp.example.com" // the public name, as an ingress forwards it
			r.SetXForwarded()
		},
		FlushInterval: -1,
	})
	t.Cleanup(front.Close)
	roundTrip(t, newRPCClient(t, front.URL+"/mcp"), "front-proxy")
}

// The JWT example with a JWKS served by a local identity provider: a
// tenant's principal runs a task and lists it; the same subject in another
// tenant sees none of it; no token, 401.
func TestExampleJWTJWKSTenants(t *testing.T) {
	t.Parallel()
	_, upAddr := testUpstream(t)
	key := newSigningKey(t)
	jwks := jwksServer(t, key)
	addr, admin := freeAddr(t), freeAddr(t)
	runExample(t, "jwt-jwks-tenants.Caddyfile", addr, exampleEnv(t, admin, "MCP_PORT="+portOf(addr), "MCP_UPSTREAM="+upAddr,
		"MCP_JWKS_URL="+jwks, "MCP_JWT_ISSUER=https://idp.test"))
	waitReady(t, admin)
	gwURL := "http://" + addr + "/mcp"
	client := func(tenant string) *rpcClient {
		c := newRPCClient(t, gwURL)
		c.header.Set("Authorization", "Bearer "+key.token(t, "alice", tenant))
		return c
	}
	acme := client("acme")
	id := roundTrip(t, acme, "jwt")
	var page struct {
		Tasks []v2025Task `json:"tasks"`
	}
	acme.result("tasks/list", nil, &page)
	if len(page.Tasks) != 1 || page.Tasks[0].TaskID != id {
		t.Errorf("alice@acme lists %+v, want her task %s", page.Tasks, id)
	}
	other := client("globex")
	other.initialize("")
	other.result("tasks/list", nil, &page)
	if len(page.Tasks) != 0 {
		t.Errorf("alice@globex lists %+v, want none of alice@acme's tasks", page.Tasks)
	}
	resp, err := httpClient.Post(gwURL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a call without a token: HTTP %d, want 401", resp.StatusCode)
	}
}

// The PostgreSQL examples: two replicas of postgres-replica.Caddyfile on
// one database behind postgres-balancer.Caddyfile. A task created through
// the balancer is polled and its result read through it, whichever
// replica each request reaches.
func TestExamplePostgresReplicas(t *testing.T) {
	t.Parallel()
	_, upAddr := testUpstream(t)
	dsn, _ := testDatabase(t)
	var replicas []string
	for range 2 {
		addr, admin := freeAddr(t), freeAddr(t)
		runExample(t, "postgres-replica.Caddyfile", addr, exampleEnv(t, admin, "MCP_PORT="+portOf(addr), "MCP_UPSTREAM="+upAddr,
			"MCP_TASKS_DSN="+dsn, "MCP_JWT_SECRET="+testHMACSecret, "MCP_JWT_ISSUER=https://idp.test"))
		waitReady(t, admin)
		replicas = append(replicas, addr)
	}
	lb := freeAddr(t)
	runExample(t, "postgres-balancer.Caddyfile", lb, exampleEnv(t, freeAddr(t), "MCP_PORT="+portOf(lb), "MCP_REPLICAS="+strings.Join(replicas, " ")))
	c := newRPCClient(t, "http://"+lb+"/mcp")
	c.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", ""))
	roundTrip(t, c, "replicas")
}

// The version bridges example: a 2026-07-28 client's call becomes a task
// in front of the go-sdk fixture, which speaks only 2025-11-25; a
// 2025-11-25 client's task runs in front of the task-runtime fixture,
// which speaks only 2026-07-28.
func TestExampleVersionBridges(t *testing.T) {
	t.Parallel()
	_, v2025Up := testUpstream(t)
	_, v2026URL := startTaskRuntimeInProcess(t, taskruntime.Options{PollInterval: 20 * time.Millisecond})
	v2026Up := strings.TrimSuffix(strings.TrimPrefix(v2026URL, "http://"), "/mcp")
	first, second, admin := freeAddr(t), freeAddr(t), freeAddr(t)
	runExample(t, "version-bridges.Caddyfile", first, exampleEnv(t, admin,
		"MCP_PORT_V2025_SERVER="+portOf(first), "MCP_UPSTREAM_V2025="+v2025Up,
		"MCP_PORT_V2026_SERVER="+portOf(second), "MCP_UPSTREAM_V2026="+v2026Up))
	waitReady(t, admin)

	mc := newV2026Client(t, "http://"+first+"/mcp", true)
	res := mc.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 2, "label": "bridged"}})
	if str(res["resultType"]) != "task" {
		t.Fatalf("the 2026-07-28 call through the version bridge answered %v, want a task", res)
	}
	if got := mc.waitStatus(str(res["taskId"]), "completed"); !strings.Contains(string(got["result"]), "bridged") {
		t.Errorf("the bridged task's result: %s", got["result"])
	}

	c := newRPCClient(t, "http://"+second+"/mcp")
	c.initialize("")
	id := c.createTask(taskruntime.ToolSteps, map[string]any{"steps": 2, "stepMs": 0, "label": "reverse"}, 60000).TaskID
	waitFor(t, 30*time.Second, "the reverse-bridged task to complete", func() bool { return c.getTask(id).Status == "completed" })
	if m := c.call("tasks/result", map[string]string{"taskId": id}); m.Error != nil || !strings.Contains(string(m.Result), "Completed 2 steps") {
		t.Errorf("the reverse-bridged task's result: %s %+v", m.Result, m.Error)
	}
}

// signingKey is an identity provider's RSA key with its kid.
type signingKey struct {
	kid string
	key *rsa.PrivateKey
}

func newSigningKey(t *testing.T) *signingKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &signingKey{kid: "example-key-1", key: k}
}

// token signs an RS256 token for subject in tenant (the org claim), for
// the audience of the JWT example.
func (k *signingKey) token(t *testing.T, subject, tenant string) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": subject, "org": tenant, "iss": "https://idp.test",
		"aud": "mcp-gateway", "exp": time.Now().Add(time.Hour).Unix()})
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// jwksServer serves k's public key as a JWK Set and returns its URL.
func jwksServer(t *testing.T, k *signingKey) string {
	t.Helper()
	b64 := base64.RawURLEncoding.EncodeToString
	set, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": k.kid, "use": "sig", "alg": "RS256",
		"n": b64(k.key.N.Bytes()), "e": b64(big.NewInt(int64(k.key.E)).Bytes()),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(set)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/.well-known/jwks.json"
}
