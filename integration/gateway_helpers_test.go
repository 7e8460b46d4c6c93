package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// caddyBinary is the Caddy built with our module: $CADDY_BINARY (set by
// ./xcaddy.sh test, which builds it once per run), or built here by
// ../xcaddy.sh build when the tests run on their own.
var caddyBinary string

func TestMain(m *testing.M) {
	caddyBinary = os.Getenv("CADDY_BINARY")
	if caddyBinary == "" {
		root, err := filepath.Abs("..")
		if err == nil {
			cmd := exec.Command(filepath.Join(root, "xcaddy.sh"), "build")
			cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
			err = cmd.Run()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "building caddy with ../xcaddy.sh build: %v\n", err)
			os.Exit(1)
		}
		caddyBinary = filepath.Join(root, "caddy")
	}
	if _, err := os.Stat(caddyBinary); err != nil {
		fmt.Fprintf(os.Stderr, "caddy binary: %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	stopTestPostgres()
	os.Exit(code)
}

// gatewayOptions describes one Caddy under test.
type gatewayOptions struct {
	// Upstream is the address reverse_proxy sends to (host:port).
	Upstream string
	// Directives are extra lines inside the mcp_tasks block.
	Directives string
	// StorageDir defaults to a fresh temporary directory.
	StorageDir string
	// SiteDirectives are extra lines in the site block, before mcp_tasks.
	SiteDirectives string
	// GlobalOptions are extra lines in the global options block (servers
	// timeouts, say).
	GlobalOptions string
	// AdminOptions are lines inside the admin option's block (origins).
	AdminOptions string
	// Env are extra environment variables of the Caddy process
	// (OTEL_EXPORTER_OTLP_ENDPOINT, say).
	Env []string
}

// gateway is a running Caddy process with the mcp_tasks module in front of
// an upstream.
type gateway struct {
	t         testing.TB
	opts      gatewayOptions
	addr      string
	adminAddr string
	home      string
	config    string
	proc      *startedProcess
	// URL is the MCP endpoint.
	URL string
}

// startGateway writes a Caddyfile and runs the real Caddy binary on it.
func startGateway(t testing.TB, opts gatewayOptions) *gateway {
	t.Helper()
	return startGatewayWithAdmin(t, freeAddr(t), opts)
}

// startGatewayWithAdmin is startGateway with the admin endpoint on
// adminAddr, for AdminOptions that name it (origins).
func startGatewayWithAdmin(t testing.TB, adminAddr string, opts gatewayOptions) *gateway {
	t.Helper()
	if opts.StorageDir == "" {
		opts.StorageDir = filepath.Join(t.TempDir(), "store")
	}
	g := &gateway{t: t, opts: opts, addr: freeAddr(t), adminAddr: adminAddr, home: t.TempDir()}
	g.URL = "http://" + g.addr + "/mcp"
	g.config = filepath.Join(g.home, "Caddyfile")
	g.writeConfig(opts.Directives)
	g.proc = startProcessEnv(t, g.env(), g.addr, caddyBinary, "run", "--config", g.config, "--adapter", "caddyfile")
	return g
}

func (g *gateway) env() []string {
	return append([]string{"XDG_DATA_HOME=" + filepath.Join(g.home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(g.home, "config"), "HOME=" + g.home}, g.opts.Env...)
}

func (g *gateway) writeConfig(directives string) {
	g.t.Helper()
	admin := g.adminAddr
	if g.opts.AdminOptions != "" {
		admin += " {\n" + indent(g.opts.AdminOptions, "\t\t") + "\t}"
	}
	cfg := fmt.Sprintf(`{
	admin %s
	persist_config off
	auto_https off
	grace_period 10s
%s}

http://:%s {
	bind 127.0.0.1
%s	mcp_tasks /mcp* {
		storage_dir %s
%s
	}
	reverse_proxy /mcp* %s
}
`, admin, indent(g.opts.GlobalOptions, "\t"), g.port(), indent(g.opts.SiteDirectives, "\t"), g.opts.StorageDir, indent(directives, "\t\t"), g.opts.Upstream)
	if err := os.WriteFile(g.config, []byte(cfg), 0o600); err != nil {
		g.t.Fatal(err)
	}
}

// port is the port of the gateway's address. The site matches every host
// name, as a deployment's ":8080" does, so that Host checks are the
// upstream's and the gateway's, not Caddy's site matching.
func (g *gateway) port() string { return g.addr[strings.LastIndexByte(g.addr, ':')+1:] }

func indent(s, prefix string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		if strings.TrimSpace(line) != "" {
			b.WriteString(prefix + strings.TrimSpace(line) + "\n")
		}
	}
	return b.String()
}

// reload rewrites the mcp_tasks block and runs `caddy reload`.
func (g *gateway) reload(directives string) {
	g.t.Helper()
	g.writeConfig(directives)
	cmd := exec.Command(caddyBinary, "reload", "--config", g.config, "--adapter", "caddyfile", "--address", g.adminAddr)
	cmd.Env = append(os.Environ(), g.env()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		g.t.Fatalf("caddy reload: %v\n%s\ncaddy output:\n%s", err, out, tail(g.proc.Output(), 4000))
	}
	forgetIdleConnections()
	g.awaitNewServer()
}

// awaitNewServer returns once the gateway's port answers a request after a
// reload. Caddy's reload returns when the old configuration's servers have
// begun to shut down, not when they have: until the old server closes its
// listener it may still accept a connection, and Go's server drops a
// request it reads while shutting down without an answer (the client sees
// EOF). A client of any Caddy meets that race in the instant of a reload;
// the tests that follow a reload must not. The probe's path matches no
// route, so Caddy answers it itself.
func (g *gateway) awaitNewServer() {
	g.t.Helper()
	probe := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	url := "http://" + g.addr + "/.reload-probe"
	waitFor(g.t, 30*time.Second, "the reloaded server to answer", func() bool {
		resp, err := probe.Get(url) //nolint:noctx // the probe's own timeout bounds it
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return true
	})
}

// forgetIdleConnections drops the test client's idle keep-alive
// connections after a reload: the old configuration's server closes its
// idle connections as it shuts down, and a POST sent on one the client
// picked at that instant fails with EOF (Go retries only idempotent
// requests). A client of any Caddy meets the same race on a reload; it is
// not the gateway's.
func forgetIdleConnections() { httpClient.CloseIdleConnections() }

// metrics returns Caddy's Prometheus metrics from its admin endpoint.
func (g *gateway) metrics() string {
	g.t.Helper()
	resp, err := httpClient.Get("http://" + g.adminAddr + "/metrics")
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return string(data)
}

// logs returns what Caddy printed so far.
func (g *gateway) logs() string { return g.proc.Output() }

// testUpstream runs the go-sdk fixture server on a real loopback listener.
func testUpstream(t testing.TB) (*upstream.Server, string) {
	t.Helper()
	up := upstream.New(upstream.Options{})
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	return up, strings.TrimPrefix(srv.URL, "http://")
}

var httpClient = &http.Client{Timeout: 60 * time.Second}

// TestCaddyfileExampleAdapts checks that the Caddyfile that ./xcaddy.sh run
// serves is valid for the built binary, with mcp_tasks ordered before
// reverse_proxy by the module itself.
func TestCaddyfileExampleAdapts(t *testing.T) {
	t.Parallel()
	out, err := exec.Command(caddyBinary, "adapt", "--config", "../Caddyfile.example", "--adapter", "caddyfile").CombinedOutput()
	if err != nil {
		t.Fatalf("caddy adapt Caddyfile.example: %v\n%s", err, out)
	}
	s := string(out)
	mcp, proxy := strings.Index(s, `"handler":"mcp_tasks"`), strings.Index(s, `"handler":"reverse_proxy"`)
	if mcp < 0 || proxy < 0 || mcp > proxy {
		t.Errorf("mcp_tasks (at %d) must come before reverse_proxy (at %d):\n%s", mcp, proxy, s)
	}
}
