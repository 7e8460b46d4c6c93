package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What an operator meets on day one: logging, front proxies, layouts,
// metrics, preflights. These tests write whole Caddyfiles, as a user does.

// startCaddyfile runs the real Caddy on the Caddyfile that config returns
// for the gateway's admin address and port. The MCP endpoint is /mcp.
func startCaddyfile(t *testing.T, config func(admin, port string) string) *gateway {
	t.Helper()
	g := &gateway{t: t, addr: freeAddr(t), adminAddr: freeAddr(t), home: t.TempDir()}
	g.URL = "http://" + g.addr + "/mcp"
	g.config = filepath.Join(g.home, "Caddyfile")
	if err := os.WriteFile(g.config, []byte(config(g.adminAddr, g.port())), 0o600); err != nil {
		t.Fatal(err)
	}
	g.proc = startProcessEnv(t, g.env(), g.addr, caddyBinary, "run", "--config", g.config, "--adapter", "caddyfile")
	return g
}

// globalHead is the global options every test Caddyfile starts with.
func globalHead(admin, extra string) string {
	return "{\n\tadmin " + admin + "\n\tpersist_config off\n\tauto_https off\n" + extra + "\n}\n"
}

// readmeBlock returns the README's caddyfile code block that contains marker.
func readmeBlock(t *testing.T, marker string) string {
	t.Helper()
	data := readManual(t)
	for _, block := range regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		if strings.Contains(block[1], marker) {
			return block[1]
		}
	}
	t.Fatalf("README has no caddyfile block with %q", marker)
	return ""
}

// The README's audit log configuration routes the audit
// lines to their own file.
func TestAuditLogToFile(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	auditFile := filepath.Join(t.TempDir(), "mcp-audit.log")
	block := readmeBlock(t, "include http.handlers.mcp_tasks.audit")
	block = strings.ReplaceAll(block, "/var/log/mcp-audit.log", auditFile)
	// The README's block is the global options; add what the test needs.
	block = strings.Replace(block, "{\n", "{\n\tpersist_config off\n\tauto_https off\n", 1)
	gw := startCaddyfile(t, func(admin, port string) string {
		return strings.Replace(block, "{\n", "{\n\tadmin "+admin+"\n", 1) + `
http://:` + port + ` {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir ` + filepath.Join(t.TempDir(), "store") + `
` + v2025Tools + hmacAuth + `
	}
	reverse_proxy /mcp* ` + addr + `
}
`
	})
	c := newRPCClient(t, gw.URL)
	c.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	c.initialize("")
	task := c.createTask("slow_compute", map[string]any{"seconds": 0.1}, 60000)
	waitFor(t, 30*time.Second, "a task created line in the audit file", func() bool {
		data, _ := os.ReadFile(auditFile)
		return strings.Contains(string(data), `"msg":"task created"`) && strings.Contains(string(data), task.TaskID)
	})
	data, _ := os.ReadFile(auditFile)
	if !strings.Contains(string(data), `"logger":"http.handlers.mcp_tasks.audit"`) || !strings.Contains(string(data), `"principal":"alice"`) {
		t.Errorf("audit file:\n%s", data)
	}
}

// frontProxy is a plain Go reverse proxy on loopback that forwards to the
// gateway under a public host name, as a TLS terminator or ingress does.
func frontProxy(t *testing.T, gatewayURL, publicHost string) string {
	t.Helper()
	target, _ := url.Parse(gatewayURL)
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: target.Scheme, Host: target.Host})
			r.Out.Host = publicHost
			r.SetXForwarded()
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// Behind a front proxy that forwards a public Host to a
// loopback listener, authenticated task calls work; an anonymous call on
// loopback under a foreign Host is still refused (DNS rebinding).
func TestFrontProxy(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	authed := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})
	c := newRPCClient(t, frontProxy(t, authed.URL, "mcp.example.com"))
	c.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	c.initialize("")
	task := c.createTask("slow_compute", map[string]any{"seconds": 0.1}, 60000)
	if got := c.getTask(task.TaskID); got.TaskID != task.TaskID {
		t.Errorf("tasks/get through the front proxy: %+v", got)
	}

	anonymous := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})
	probe := func(url, host string) int {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Host = host
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for range 2 {
		if code := probe(anonymous.URL, "rebound.example.com"); code != http.StatusForbidden {
			t.Errorf("anonymous call on loopback under a foreign Host: HTTP %d, want 403", code)
		}
	}
	// The operator hears of the first refusal, with what to change when
	// it was their own front proxy, and not of every one after it.
	const hint = "add the proxy to the trusted_proxies server option"
	waitFor(t, 30*time.Second, "a warning of the refusal that names trusted_proxies", func() bool {
		return strings.Contains(anonymous.logs(), hint)
	})
	if n := strings.Count(anonymous.logs(), hint); n != 1 {
		t.Errorf("%d warnings of refused requests, want 1 for the first:\n%s", n, tail(anonymous.logs(), 4000))
	}
	if code := probe(anonymous.URL, "localhost"); code == http.StatusForbidden {
		t.Error("anonymous call under localhost refused")
	}
	// The operator's switch: on guards authenticated callers too.
	strict := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth + "dns_rebinding_protection on"})
	sc := newRPCClient(t, frontProxy(t, strict.URL, "mcp.example.com"))
	sc.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	sc.initialize("")
	if m := sc.callTool("slow_compute", map[string]any{"seconds": 0.1}, map[string]any{"ttl": 60000}); m.Error == nil {
		t.Errorf("dns_rebinding_protection on: task created through the front proxy: %s", m.Result)
	}
}

// Beside a handle block for the same path, the gateway and
// its auth still run; inside a handle block it works as well.
func TestHandleLayouts(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	layouts := map[string]string{
		"beside handle": `
	mcp_tasks /mcp* {
		storage_dir %STORE%
%DIRECTIVES%
	}
	handle /mcp* {
		reverse_proxy %UPSTREAM%
	}`,
		"inside handle": `
	handle /mcp* {
		mcp_tasks {
			storage_dir %STORE%
%DIRECTIVES%
		}
		reverse_proxy %UPSTREAM%
	}`,
		"beside route": `
	route /mcp* {
		reverse_proxy %UPSTREAM%
	}
	mcp_tasks /mcp* {
		storage_dir %STORE%
%DIRECTIVES%
	}`,
	}
	for name, layout := range layouts {
		t.Run(name, func(t *testing.T) {
			site := strings.NewReplacer("%STORE%", filepath.Join(t.TempDir(), "store"), "%DIRECTIVES%", v2025Tools+hmacAuth, "%UPSTREAM%", addr).Replace(layout)
			gw := startCaddyfile(t, func(admin, port string) string {
				return globalHead(admin, "") + "http://:" + port + " {\n\tbind 127.0.0.1\n" + site + "\n}\n"
			})
			resp, err := httpClient.Post(gw.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("no token: HTTP %d, want the gateway's 401 (the upstream served it)", resp.StatusCode)
			}
			c := newRPCClient(t, gw.URL)
			c.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
			c.initialize("")
			c.createTask("slow_compute", map[string]any{"seconds": 0.1}, 60000)
			if strings.Contains(gw.logs(), shadowWarning) {
				t.Errorf("a layout that runs the gateway is warned about:\n%s", gw.logs())
			}
		})
	}
}

const shadowWarning = "they skip the gateway and its auth"

// forward_auth before mcp_tasks with a principal placeholder, as the README
// suggests: tasks are bound to the user the auth service names, a refused
// request never reaches the gateway or the upstream, and loading the
// configuration warns about nothing (forward_auth answers only the requests
// it refuses; it is no handler that skips the gateway).
func TestForwardAuthLayout(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	authService := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer alice-token":
			w.Header().Set("X-Auth-User", "alice")
		case "Bearer bob-token":
			w.Header().Set("X-Auth-User", "bob")
		default:
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	t.Cleanup(authService.Close)
	gw := startCaddyfile(t, func(admin, port string) string {
		return globalHead(admin, "") + `
http://:` + port + ` {
	bind 127.0.0.1
	forward_auth /mcp* ` + strings.TrimPrefix(authService.URL, "http://") + ` {
		uri /auth
		copy_headers X-Auth-User
	}
	mcp_tasks /mcp* {
		storage_dir ` + filepath.Join(t.TempDir(), "store") + `
		principal {http.request.header.X-Auth-User}
` + v2025Tools + `
	}
	reverse_proxy /mcp* ` + addr + `
}
`
	})
	resp, err := httpClient.Post(gw.URL, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: HTTP %d, want the auth service's 401", resp.StatusCode)
	}
	alice, bob := newRPCClient(t, gw.URL), newRPCClient(t, gw.URL)
	alice.header.Set("Authorization", "Bearer alice-token")
	bob.header.Set("Authorization", "Bearer bob-token")
	alice.initialize("")
	bob.initialize("")
	task := alice.createTask("slow_compute", map[string]any{"seconds": 0.1}, 60000)
	if got := alice.getTask(task.TaskID); got.TaskID != task.TaskID {
		t.Errorf("alice's tasks/get: %+v", got)
	}
	if m := bob.call("tasks/get", map[string]string{"taskId": task.TaskID}); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("bob's tasks/get of alice's task: %s %+v, want -32602", m.Result, m.Error)
	}
	if strings.Contains(gw.logs(), shadowWarning) {
		t.Errorf("forward_auth before the gateway is warned about as a handler that skips it:\n%s", grepLines(gw.logs(), shadowWarning))
	}
}

// Layouts in which requests of the gateway's path reach the upstream
// without running mcp_tasks, and so without its JWT auth, are refused by
// caddy validate, caddy adapt --validate and caddy run, with a message
// that says what the config does and what to do; allow_auth_bypass loads
// them with a warning. The module's own order, a handle block beside or
// around mcp_tasks, and mcp_tasks written first in a route block load.
func TestLayoutsSkippingAuthRefused(t *testing.T) {
	t.Parallel()
	const upstream = "127.0.0.1:9"
	layouts := []struct {
		name, global, site string
		want               string // in the error; "" when the layout loads
		warn               string // in the warning of a layout that loads with one
	}{
		{"route, reverse_proxy written first", "", `
	route /mcp* {
		reverse_proxy ` + upstream + `
		mcp_tasks {
			%DIRECTIVES%
		}
	}`, "reverse_proxy runs before mcp_tasks in the same route and answers its requests first", ""},
		{"global order before reverse_proxy, beside handle", "\torder mcp_tasks before reverse_proxy", `
	mcp_tasks /mcp* {
		%DIRECTIVES%
	}
	handle /mcp* {
		reverse_proxy ` + upstream + `
	}`, "a handle or route block runs before mcp_tasks in the same route and answers its requests first", ""},
		{"exact path", "", `
	mcp_tasks /mcp {
		%DIRECTIVES%
	}
	reverse_proxy ` + upstream, "mcp_tasks matches exact paths only (/mcp), and a later handler answers the paths below them (such as /mcp/)", ""},
		{"module's own order, beside handle", "", `
	mcp_tasks /mcp* {
		%DIRECTIVES%
	}
	handle /mcp* {
		reverse_proxy ` + upstream + `
	}`, "", ""},
		{"global order before reverse_proxy, no routing block", "\torder mcp_tasks before reverse_proxy", `
	mcp_tasks /mcp* {
		%DIRECTIVES%
	}
	reverse_proxy /mcp* ` + upstream, "", ""},
		{"route, mcp_tasks written first", "", `
	route /mcp* {
		mcp_tasks {
			%DIRECTIVES%
		}
		reverse_proxy ` + upstream + `
	}`, "", ""},
		{"exact path, nothing below it", "", `
	mcp_tasks /mcp {
		%DIRECTIVES%
	}
	reverse_proxy /mcp ` + upstream, "", ""},
		// What answers first without reaching an upstream keeps requests
		// from the gateway, but lets none through unauthenticated.
		{"route, a preflight's respond written first", "", `
	route /mcp* {
		@preflight method OPTIONS
		respond @preflight 204
		mcp_tasks {
			%DIRECTIVES%
		}
		reverse_proxy ` + upstream + `
	}`, "", "(static_response (respond or redir)) matches requests of mcp_tasks' route 1 and answers them before mcp_tasks runs"},
		// A handle block beside the gateway's, whose matcher may take the
		// gateway's requests too: whether it does cannot be told.
		{"handle with a query matcher beside the gateway's", "", `
	@debug query debug=1
	handle @debug {
		reverse_proxy ` + upstream + `
	}
	handle /mcp* {
		mcp_tasks {
			%DIRECTIVES%
		}
		reverse_proxy ` + upstream + `
	}`, "", "in an enclosing route list"},
	}
	for _, tt := range layouts {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			write := func(name, directives string) string {
				site := strings.ReplaceAll(tt.site, "%DIRECTIVES%", "storage_dir "+filepath.Join(dir, "store")+"\n"+directives)
				cfg := filepath.Join(dir, name)
				body := "{\n\tadmin off\n\tpersist_config off\n\tauto_https off\n" + tt.global + "\n}\nhttp://" + freeAddr(t) + " {\n" + site + "\n}\n"
				if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
				return cfg
			}
			withAuth := write("Caddyfile", hmacAuth)
			_, errOut, ok := runCaddy(t, "validate", "--config", withAuth, "--adapter", "caddyfile")
			if tt.want == "" && tt.warn != "" {
				if !ok || !strings.Contains(errOut, tt.warn) {
					t.Fatalf("caddy validate: ok=%v, want the layout loaded with a warning saying %q:\n%s", ok, tt.warn, errOut)
				}
				return
			}
			if tt.want == "" {
				if !ok || strings.Contains(errOut, shadowWarning) || strings.Contains(errOut, "exact paths only") {
					t.Fatalf("a valid layout is refused or warned about: %s", errOut)
				}
				return
			}
			if ok || !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "set allow_auth_bypass") ||
				!strings.Contains(errOut, "requests would reach the upstream unauthenticated") {
				t.Fatalf("caddy validate: ok=%v, want a failure saying %q and naming allow_auth_bypass:\n%s", ok, tt.want, errOut)
			}
			if strings.Contains(errOut, "invoke") {
				t.Errorf("the message names invoke, which the config does not use:\n%s", errOut)
			}
			if _, errOut, ok := runCaddy(t, "adapt", "--validate", "--config", withAuth, "--adapter", "caddyfile"); ok || !strings.Contains(errOut, tt.want) {
				t.Errorf("caddy adapt --validate: ok=%v:\n%s", ok, errOut)
			}
			if errOut, ok := runCaddyToExit(t, "run", "--config", withAuth, "--adapter", "caddyfile"); ok || !strings.Contains(errOut, tt.want) {
				t.Errorf("caddy run: ok=%v:\n%s", ok, errOut)
			}
			optOut := write("Caddyfile.allowed", hmacAuth+"allow_auth_bypass\n")
			if _, errOut, ok := runCaddy(t, "validate", "--config", optOut, "--adapter", "caddyfile"); !ok || !strings.Contains(errOut, tt.want) {
				t.Errorf("with allow_auth_bypass: ok=%v, want a load with the warning:\n%s", ok, errOut)
			}
		})
	}
}

// runCaddyToExit runs the real caddy binary with args, for a command that
// should exit by itself (caddy run of a config it refuses), and returns its
// stderr and whether it exited 0; one that keeps running is killed at the
// deadline and reported.
func runCaddyToExit(t *testing.T, args ...string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, caddyBinary, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("caddy %v kept running:\n%s", args, stderr.String())
	}
	return stderr.String(), err == nil
}

// With several sites, the warning judges the site being loaded, and names
// it: Caddy provisions its servers one at a time, in no fixed order, and
// every site not yet loaded looks like the one being loaded. One site of
// three is shadowed (redir answers before mcp_tasks); exactly that one is
// warned about, on every load.
func TestShadowWarningPerSite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	site := func(port, extra string) string {
		return "http://:" + port + " {\n" + extra + "\tmcp_tasks /mcp* {\n\t\tstorage_dir " + filepath.Join(dir, "store") +
			"\n\t}\n\treverse_proxy /mcp* 127.0.0.1:9\n}\n"
	}
	cfg := filepath.Join(dir, "Caddyfile")
	body := "{\n\tadmin off\n\tauto_https off\n}\n" + site("9401", "") + site("9402", "\tredir /mcp* /elsewhere\n") + site("9403", "")
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(caddyBinary, "adapt", "--config", cfg, "--adapter", "caddyfile").Output()
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	var adapted struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Listen []string `json:"listen"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &adapted); err != nil {
		t.Fatal(err)
	}
	shadowed := ""
	for name, srv := range adapted.Apps.HTTP.Servers {
		if len(srv.Listen) == 1 && strings.HasSuffix(srv.Listen[0], ":9402") {
			shadowed = name
		}
	}
	if shadowed == "" {
		t.Fatalf("no server listens on :9402 in %s", out)
	}
	for i := range 6 { // the servers' order changes from load to load
		_, errOut, ok := runCaddy(t, "validate", "--config", cfg, "--adapter", "caddyfile")
		if !ok {
			t.Fatalf("validate: %s", errOut)
		}
		warnings := grepLines(errOut, shadowWarning)
		if n := strings.Count(warnings, shadowWarning); n != 1 || !strings.Contains(warnings, `"server":"`+shadowed+`"`) {
			t.Fatalf("load %d: %d warnings, want one naming %s:\n%s", i, n, shadowed, warnings)
		}
	}
}

// A global order that undoes the module's own is warned about when the
// Caddyfile is adapted, naming only what the config does.
func TestOrderOverrideWarned(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "Caddyfile")
	site := "{\n\torder mcp_tasks before reverse_proxy\n}\n:8080 {\n\tmcp_tasks /mcp*\n\thandle /mcp* {\n\t\treverse_proxy 127.0.0.1:9100\n\t}\n}\n" +
		":8081 {\n\tmcp_tasks /mcp*\n\treverse_proxy /mcp* 127.0.0.1:9100\n}\n"
	if err := os.WriteFile(cfg, []byte(site), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(caddyBinary, "adapt", "--config", cfg, "--adapter", "caddyfile").CombinedOutput()
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "moves mcp_tasks after handle, handle_path, route (the module orders itself before them)"); n != 1 {
		t.Errorf("%d warnings about the order for two sites, want one, in:\n%s", n, out)
	}
	if strings.Contains(string(out), "invoke") {
		t.Errorf("the warning names invoke, which the config does not use:\n%s", out)
	}
}

// Cancelled tasks are counted as ended, and the store's
// gauges report active and stored tasks and its size.
func TestMetricsCancelledAndGauges(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	keep := c.createTask("slow_compute", map[string]any{"seconds": 60}, 60000)
	gone := c.createTask("slow_compute", map[string]any{"seconds": 60}, 60000)
	if m := c.call("tasks/cancel", map[string]string{"taskId": gone.TaskID}); m.Error != nil {
		t.Fatalf("tasks/cancel: %+v", m.Error)
	}
	_ = keep
	want := []string{
		`caddy_mcp_tasks_ended_total{era="2025-11-25",status="cancelled"} 1`,
		`caddy_mcp_tasks_duration_seconds_count{era="2025-11-25",status="cancelled"} 1`,
		`caddy_mcp_tasks_tasks_active 1`,
		`caddy_mcp_tasks_tasks_stored 2`,
	}
	var metrics string
	waitFor(t, 30*time.Second, "the gauges to catch up", func() bool {
		metrics = gw.metrics()
		for _, w := range want {
			if !strings.Contains(metrics, w) {
				return false
			}
		}
		return true
	})
	if m := regexp.MustCompile(`(?m)^caddy_mcp_tasks_store_size_bytes (\S+)$`).FindStringSubmatch(metrics); m == nil || m[1] == "0" {
		t.Errorf("store size gauge missing or zero:\n%s", grepLines(metrics, "caddy_mcp_tasks"))
	}
}

// A CORS preflight is not an auth failure, and anonymous
// callers behind a trusted proxy are rate-limited by their own address.
func TestPreflightAndClientIP(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startCaddyfile(t, func(admin, port string) string {
		return globalHead(admin, "\tservers {\n\t\ttrusted_proxies static 127.0.0.1/32\n\t}") + `
http://:` + port + ` {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir ` + filepath.Join(t.TempDir(), "store") + `
		rate_limit 1
	}
	@preflight method OPTIONS
	respond @preflight 204
	reverse_proxy /mcp* ` + addr + `
}
`
	})
	authed := startCaddyfile(t, func(admin, port string) string {
		return globalHead(admin, "") + `
http://:` + port + ` {
	bind 127.0.0.1
	route /mcp* {
		mcp_tasks {
			storage_dir ` + filepath.Join(t.TempDir(), "store") + `
` + hmacAuth + `
		}
		@preflight method OPTIONS
		respond @preflight 204
		reverse_proxy ` + addr + `
	}
}
`
	})
	req, _ := http.NewRequest(http.MethodOptions, authed.URL, nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("preflight without a token: HTTP %d, want the next handler's 204", resp.StatusCode)
	}
	// An OPTIONS request that is not a preflight is checked as any other.
	req, _ = http.NewRequest(http.MethodOptions, authed.URL, nil)
	if resp, err = httpClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("plain OPTIONS without a token: HTTP %d, want 401", resp.StatusCode)
	}

	send := func(clientIP string) int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, gw.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"x"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-Forwarded-For", clientIP)
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	limited := false
	for range 10 {
		if send("198.51.100.1") == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Fatal("ten calls of one client at rate_limit 1 were never limited")
	}
	if code := send("198.51.100.2"); code == http.StatusTooManyRequests {
		t.Error("another client behind the same trusted proxy shares the first one's bucket")
	}
}

// The example Caddyfile is as caddy fmt writes it, so
// adapting it warns about nothing.
func TestCaddyfileExampleFormatted(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(caddyBinary, "fmt", "../Caddyfile.example").Output()
	if err != nil {
		t.Fatalf("caddy fmt: %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("caddy fmt changes Caddyfile.example:\n%s", got)
	}
	out, err := exec.Command(caddyBinary, "adapt", "--config", "../Caddyfile.example", "--adapter", "caddyfile").CombinedOutput()
	if err != nil || strings.Contains(string(out), `"level":"warn"`) || strings.Contains(string(out), "not formatted") {
		t.Errorf("caddy adapt Caddyfile.example: %v\n%s", err, out)
	}
}
