package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// multiSiteCaddy is one Caddy process serving several sites from one
// Caddyfile; it can be killed and started again on the same file.
type multiSiteCaddy struct {
	t         *testing.T
	config    string
	home      string
	firstAddr string
	proc      *startedProcess
}

func startMultiSite(t *testing.T, sites string, firstAddr string) *multiSiteCaddy {
	t.Helper()
	m := &multiSiteCaddy{t: t, home: t.TempDir(), firstAddr: firstAddr}
	m.config = filepath.Join(m.home, "Caddyfile")
	cfg := fmt.Sprintf("{\n\tadmin %s\n\tpersist_config off\n\tauto_https off\n\tgrace_period 10s\n}\n\n%s", freeAddr(t), sites)
	if err := os.WriteFile(m.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	m.start()
	return m
}

func (m *multiSiteCaddy) start() {
	m.t.Helper()
	env := []string{"XDG_DATA_HOME=" + filepath.Join(m.home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(m.home, "config"), "HOME=" + m.home}
	m.proc = startProcessEnv(m.t, env, m.firstAddr, caddyBinary, "run", "--config", m.config, "--adapter", "caddyfile")
}

// restart kills Caddy (no clean shutdown) and runs it again on the same
// Caddyfile and storage.
func (m *multiSiteCaddy) restart() {
	m.t.Helper()
	if err := m.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		m.t.Fatal(err)
	}
	select {
	case <-m.proc.done:
	case <-time.After(10 * time.Second):
		m.t.Fatal("caddy did not die")
	}
	m.start()
}

// siteBlock is one site in front of upstream with the given mcp_tasks lines.
func siteBlock(addr, upstream, store, siteDirectives, directives string) string {
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	return fmt.Sprintf("http://:%s {\n\tbind 127.0.0.1\n%s\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n%s\t}\n\treverse_proxy /mcp* %s\n}\n",
		port, indent(siteDirectives, "\t"), store, indent(v2025Tools+directives, "\t\t"), upstream)
}

func hmacTokenWith(t *testing.T, secret, subject string) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": subject, "iss": "https://idp.test", "aud": "mcp-gateway", "exp": time.Now().Add(time.Hour).Unix()}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The owner key includes the trust domain that authenticated the caller:
// two sites in one Caddyfile share one storage directory, and the same user
// name on each (two HMAC secrets; two basic_auth user lists behind
// principal) is two principals. Site 2 sees site 1's tasks exactly as ids
// that never existed, and a restart keeps every task reachable for its
// owner.
func TestTrustDomainsSeparateSitesSharingAStore(t *testing.T) {
	t.Parallel()
	_, up := testUpstream(t)
	store := filepath.Join(t.TempDir(), "shared-store")
	hash := func(pw string) string {
		out, err := exec.Command(caddyBinary, "hash-password", "--plaintext", pw).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	const secret1, secret2 = "site-one-hmac-secret-of-32-bytes-or-more", "site-two-hmac-secret-of-32-bytes-or-more"
	jwtAuth := func(secret string) string {
		return "auth jwt {\nhmac_secret " + secret + "\nissuer https://idp.test\naudience mcp-gateway\n}"
	}
	addrs := []string{freeAddr(t), freeAddr(t), freeAddr(t), freeAddr(t)}
	sites := siteBlock(addrs[0], up, store, "", jwtAuth(secret1)) +
		siteBlock(addrs[1], up, store, "", jwtAuth(secret2)) +
		siteBlock(addrs[2], up, store, "basic_auth /mcp* {\nalice "+hash("pw-site-3")+"\n}", "principal {http.auth.user.id}") +
		siteBlock(addrs[3], up, store, "basic_auth /mcp* {\nalice "+hash("pw-site-4")+"\n}", "principal {http.auth.user.id}")
	caddy := startMultiSite(t, sites, addrs[0])
	for _, a := range addrs[1:] {
		waitFor(t, 10*time.Second, "site "+a, func() bool { return postStatus(a) != 0 })
	}

	type site struct {
		name, url string
		auth      string // Authorization header value of "alice" on this site
	}
	basic := func(pw string) string { return "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+pw)) }
	pairs := []struct{ owner, other site }{
		{site{"hmac site 1", "http://" + addrs[0] + "/mcp", "Bearer " + hmacTokenWith(t, secret1, "alice")},
			site{"hmac site 2", "http://" + addrs[1] + "/mcp", "Bearer " + hmacTokenWith(t, secret2, "alice")}},
		{site{"basic_auth site 3", "http://" + addrs[2] + "/mcp", basic("pw-site-3")},
			site{"basic_auth site 4", "http://" + addrs[3] + "/mcp", basic("pw-site-4")}},
	}
	client := func(s site) *rpcClient {
		c := newRPCClient(t, s.url)
		c.header.Set("Authorization", s.auth)
		c.initialize("")
		return c
	}
	tasks := make([]string, len(pairs))
	for i, p := range pairs {
		tasks[i] = client(p.owner).createTask("slow_compute", map[string]any{"seconds": 60}, 600000).TaskID
	}

	// probe compares what the other site answers for the owner's task with
	// what it answers for an id that never existed.
	probe := func(t *testing.T, other site, tk string) {
		t.Helper()
		c := client(other)
		unknown := task.NewTaskID()
		send := func(method, id string, v2026 bool) rawAnswer {
			headers := map[string]string{"Authorization": other.auth}
			if v2026 {
				maps.Copy(headers, v2026Headers(method, id))
				return postRaw(t, other.url, "", "", headers, v2026Body(9, method, map[string]any{"taskId": id}))
			}
			body, _ := jsonrpc.RequestBytes(json.RawMessage(`9`), method, map[string]string{"taskId": id})
			return postRaw(t, other.url, "", c.session, headers, string(body))
		}
		for _, m := range []struct {
			method string
			v2026  bool
		}{{"tasks/get", false}, {"tasks/result", false}, {"tasks/cancel", false}, {"tasks/get", true}, {"tasks/cancel", true}} {
			foreign, never := send(m.method, tk, m.v2026), send(m.method, unknown, m.v2026)
			if foreign.status != never.status || strings.ReplaceAll(foreign.body, tk, unknown) != never.body {
				t.Errorf("%s (modern %v): the other site's task answers differently from an unknown id:\nforeign %d %s\nunknown %d %s",
					m.method, m.v2026, foreign.status, foreign.body, never.status, never.body)
			}
		}
		list := postRaw(t, other.url, "", c.session, map[string]string{"Authorization": other.auth}, `{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`)
		if list.status != 200 || !strings.Contains(list.body, `"tasks":[]`) {
			t.Errorf("the other site lists %d %s, want no tasks", list.status, list.body)
		}
	}
	ownerSees := func(t *testing.T, owner site, tk string) {
		t.Helper()
		c := client(owner)
		if got := c.getTask(tk); got.TaskID != tk {
			t.Errorf("%s: the owner gets %+v", owner.name, got)
		}
		var list struct {
			Tasks []v2025Task `json:"tasks"`
		}
		c.result("tasks/list", nil, &list)
		if len(list.Tasks) != 1 || list.Tasks[0].TaskID != tk {
			t.Errorf("%s: the owner lists %+v, want only %s", owner.name, list.Tasks, tk)
		}
	}
	for i, p := range pairs {
		t.Run(p.other.name+" probes "+p.owner.name, func(t *testing.T) { probe(t, p.other, tasks[i]) })
		t.Run(p.owner.name+" still owns its task", func(t *testing.T) { ownerSees(t, p.owner, tasks[i]) })
	}

	caddy.restart()
	for _, a := range addrs[1:] {
		waitFor(t, 10*time.Second, "site "+a, func() bool { return postStatus(a) != 0 })
	}
	for i, p := range pairs {
		t.Run("after restart: "+p.owner.name+" still owns its task", func(t *testing.T) { ownerSees(t, p.owner, tasks[i]) })
		t.Run("after restart: "+p.other.name+" probes "+p.owner.name, func(t *testing.T) { probe(t, p.other, tasks[i]) })
	}
}

// postStatus returns the HTTP status of an empty POST to addr, 0 when it
// does not answer.
func postStatus(addr string) int {
	resp, err := httpClient.Post("http://"+addr+"/mcp", "application/json", strings.NewReader("{}"))
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
