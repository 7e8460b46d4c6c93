package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
)

// The admin API (admin.api.mcp_tasks) on the real Caddy's admin endpoint.

// adminTaskView is what the admin API shows of a task.
type adminTaskView struct {
	ID          string          `json:"id"`
	Store       string          `json:"store"`
	Status      string          `json:"status"`
	Principal   string          `json:"principal"`
	Tenant      string          `json:"tenant"`
	Tool        string          `json:"tool"`
	Era         string          `json:"era"`
	RunningHere bool            `json:"running_here"`
	Params      json.RawMessage `json:"params"`
	Result      json.RawMessage `json:"result"`
	History     []struct {
		From    string `json:"from"`
		To      string `json:"to"`
		Message string `json:"message"`
	} `json:"history"`
}

type adminPage struct {
	Store      string          `json:"store"`
	Tasks      []adminTaskView `json:"tasks"`
	NextCursor string          `json:"next_cursor"`
}

type adminHealth struct {
	Healthy bool `json:"healthy"`
	Stores  []struct {
		Store     string `json:"store"`
		Open      bool   `json:"open"`
		Reachable bool   `json:"reachable"`
		Error     string `json:"error"`
		Workers   int    `json:"workers"`
		Recovered bool   `json:"recovered"`
	} `json:"stores"`
}

// adminDo sends a request to the gateway's admin endpoint and returns the
// status and body; into, when not nil, receives the decoded body.
func adminDo(t testing.TB, adminAddr, method, path string, into any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+adminAddr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s %s: Content-Type %q, want JSON (body %s)", method, path, ct, body)
	}
	if into != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatalf("%s %s: decoding %s: %v", method, path, body, err)
		}
	}
	return resp.StatusCode, string(body)
}

func ids(tasks []adminTaskView) []string {
	var out []string
	for _, t := range tasks {
		out = append(out, t.ID)
	}
	return out
}

// Every route of the admin API against a running gateway with two
// principals: listing newest first with filters, paging and detail, one
// task, the stores, health, and a cancellation that reaches the upstream
// and is audited as the operator's.
func TestAdminAPI(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})
	admin := gw.adminAddr

	waitFor(t, 30*time.Second, "health to report the store open and recovered", func() bool {
		var h adminHealth
		code, _ := adminDo(t, admin, "GET", "/mcp_tasks/health", &h)
		return code == http.StatusOK && h.Healthy
	})

	alice := newRPCClient(t, gw.URL)
	alice.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	alice.initialize("")
	bob := newRPCClient(t, gw.URL)
	bob.header.Set("Authorization", "Bearer "+hmacToken(t, "bob", "t1"))
	bob.initialize("")

	quickA := alice.createTask("slow_compute", map[string]any{"seconds": 0.01}, 60000)
	waitFor(t, 30*time.Second, "alice's quick task to complete", func() bool { return alice.getTask(quickA.TaskID).Status == "completed" })
	quickB := bob.createTask("slow_compute", map[string]any{"seconds": 0.01}, 60000)
	waitFor(t, 30*time.Second, "bob's quick task to complete", func() bool { return bob.getTask(quickB.TaskID).Status == "completed" })
	slowA := alice.createTask("slow_compute", map[string]any{"seconds": 60, "label": "secret-argument"}, 60000)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 3); err != nil {
		t.Fatal(err)
	}
	newestFirst := []string{slowA.TaskID, quickB.TaskID, quickA.TaskID}

	t.Run("list", func(t *testing.T) {
		var page adminPage
		code, body := adminDo(t, admin, "GET", "/mcp_tasks/tasks", &page)
		if code != http.StatusOK {
			t.Fatalf("list: %d %s", code, body)
		}
		if got := ids(page.Tasks); fmt.Sprint(got) != fmt.Sprint(newestFirst) {
			t.Errorf("list = %v, want every principal's tasks newest first %v", got, newestFirst)
		}
		if page.Store != gw.opts.StorageDir || page.NextCursor != "" {
			t.Errorf("store %q (want %q), next cursor %q", page.Store, gw.opts.StorageDir, page.NextCursor)
		}
		if strings.Contains(body, "secret-argument") || strings.Contains(body, `"params"`) || strings.Contains(body, `"result"`) {
			t.Errorf("the list without detail shows arguments or results: %s", body)
		}
		if v := page.Tasks[0]; v.Principal != "alice" || v.Tenant != "t1" || v.Tool != "slow_compute" || v.Status != "working" || !v.RunningHere || v.Era != "2025-11-25" {
			t.Errorf("newest task = %+v", v)
		}
	})

	t.Run("filters", func(t *testing.T) {
		tests := []struct {
			query string
			want  []string
		}{
			{"principal=alice", []string{slowA.TaskID, quickA.TaskID}},
			{"principal=bob", []string{quickB.TaskID}},
			{"status=working", []string{slowA.TaskID}},
			{"status=completed&principal=alice", []string{quickA.TaskID}},
			{"tool=slow_compute", newestFirst},
			{"tool=greet", nil},
		}
		for _, tt := range tests {
			var page adminPage
			if code, body := adminDo(t, admin, "GET", "/mcp_tasks/tasks?"+tt.query, &page); code != http.StatusOK {
				t.Fatalf("%s: %d %s", tt.query, code, body)
			}
			if got := ids(page.Tasks); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("%s: %v, want %v", tt.query, got, tt.want)
			}
		}
	})

	t.Run("paging", func(t *testing.T) {
		var got []string
		cursor := ""
		for range 5 {
			var page adminPage
			path := "/mcp_tasks/tasks?limit=1"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			if code, body := adminDo(t, admin, "GET", path, &page); code != http.StatusOK {
				t.Fatalf("%s: %d %s", path, code, body)
			}
			if len(page.Tasks) > 1 {
				t.Fatalf("limit=1 gave %d tasks", len(page.Tasks))
			}
			got = append(got, ids(page.Tasks)...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(newestFirst) {
			t.Errorf("pages = %v, want %v", got, newestFirst)
		}
	})

	t.Run("detail", func(t *testing.T) {
		var page adminPage
		adminDo(t, admin, "GET", "/mcp_tasks/tasks?detail=1&principal=alice", &page)
		if len(page.Tasks) != 2 || !strings.Contains(string(page.Tasks[0].Params), "secret-argument") || len(page.Tasks[1].Result) == 0 {
			t.Errorf("detail = %+v, want arguments and the completed task's result", page.Tasks)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		tests := []struct {
			method, path string
			code         int
			inError      string
		}{
			{"GET", "/mcp_tasks/tasks?status=done", 400, "status"},
			{"GET", "/mcp_tasks/tasks?limit=0", 400, "limit"},
			{"GET", "/mcp_tasks/tasks?cursor=forged", 400, "cursor"},
			{"GET", "/mcp_tasks/tasks?store=/nowhere", 404, "no task store"},
			{"GET", "/mcp_tasks/tasks/unknown-task-id", 404, "not found"},
			{"POST", "/mcp_tasks/tasks/unknown-task-id/cancel", 404, "not found"},
			{"GET", "/mcp_tasks/tasks/" + slowA.TaskID + "/cancel", 405, "POST"},
			{"POST", "/mcp_tasks/tasks", 405, "GET"},
			{"GET", "/mcp_tasks/nothing", 404, "no such"},
		}
		for _, tt := range tests {
			code, body := adminDo(t, admin, tt.method, tt.path, nil)
			var apiErr struct{ Error string }
			_ = json.Unmarshal([]byte(body), &apiErr)
			if code != tt.code || !strings.Contains(apiErr.Error, tt.inError) {
				t.Errorf("%s %s = %d %s, want %d with an error about %q", tt.method, tt.path, code, body, tt.code, tt.inError)
			}
		}
	})

	t.Run("show", func(t *testing.T) {
		var v adminTaskView
		if code, body := adminDo(t, admin, "GET", "/mcp_tasks/tasks/"+quickB.TaskID, &v); code != http.StatusOK {
			t.Fatalf("show: %d %s", code, body)
		}
		if v.ID != quickB.TaskID || v.Principal != "bob" || v.Status != "completed" || v.RunningHere || v.Result != nil {
			t.Errorf("show = %+v", v)
		}
		if len(v.History) == 0 || v.History[len(v.History)-1].From != "working" || v.History[len(v.History)-1].To != "completed" {
			t.Errorf("show history = %+v, want it to end working -> completed", v.History)
		}
		adminDo(t, admin, "GET", "/mcp_tasks/tasks/"+quickB.TaskID+"?detail=1", &v)
		if !strings.Contains(string(v.Result), "content") {
			t.Errorf("show?detail=1 result = %s", v.Result)
		}
	})

	t.Run("stores", func(t *testing.T) {
		var stores []struct {
			Store string `json:"store"`
			Open  bool   `json:"open"`
		}
		adminDo(t, admin, "GET", "/mcp_tasks/stores", &stores)
		if len(stores) != 1 || stores[0].Store != gw.opts.StorageDir || !stores[0].Open {
			t.Errorf("stores = %+v", stores)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		var v adminTaskView
		if code, body := adminDo(t, admin, "POST", "/mcp_tasks/tasks/"+slowA.TaskID+"/cancel", &v); code != http.StatusOK || v.Status != "cancelled" {
			t.Fatalf("cancel: %d %s", code, body)
		}
		if n := len(v.History); n == 0 || v.History[n-1].To != "cancelled" || v.History[n-1].Message == "" {
			t.Errorf("history after the operator's cancel = %+v, want it to end in cancelled with the reason", v.History)
		}
		if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
			t.Fatalf("the upstream never saw the operator's cancellation: %v", err)
		}
		if got := alice.getTask(slowA.TaskID); got.Status != "cancelled" {
			t.Errorf("the owner sees %+v after the operator's cancel", got)
		}
		code, body := adminDo(t, admin, "POST", "/mcp_tasks/tasks/"+slowA.TaskID+"/cancel", nil)
		if code != http.StatusConflict || !strings.Contains(body, "already cancelled") {
			t.Errorf("second cancel = %d %s, want 409", code, body)
		}
		waitFor(t, 10*time.Second, "the operator's cancellation in the audit log", func() bool {
			for line := range strings.SplitSeq(gw.logs(), "\n") {
				if strings.Contains(line, `"msg":"task cancelled by operator"`) && strings.Contains(line, slowA.TaskID) &&
					strings.Contains(line, `"principal":"alice"`) && strings.Contains(line, `"operator":"admin API`) {
					return true
				}
			}
			return false
		})
	})

	t.Run("health", func(t *testing.T) {
		var h adminHealth
		code, body := adminDo(t, admin, "GET", "/mcp_tasks/health", &h)
		if code != http.StatusOK || !h.Healthy || len(h.Stores) != 1 || !h.Stores[0].Reachable || !h.Stores[0].Recovered || h.Stores[0].Store != gw.opts.StorageDir {
			t.Errorf("health = %d %s", code, body)
		}
	})
}

// On 2026-07-28 the operator's cancellation closes the call's stream, which
// the upstream observes as the request's cancellation.
func TestAdminCancelV2026(t *testing.T) {
	t.Parallel()
	c, gw, up := v2026Setup(t)
	res := c.ok("tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})
	id := str(res["taskId"])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_compute", 1); err != nil {
		t.Fatal(err)
	}
	var v adminTaskView
	if code, body := adminDo(t, gw.adminAddr, "POST", "/mcp_tasks/tasks/"+id+"/cancel", &v); code != http.StatusOK || v.Status != "cancelled" || v.Era != "2026-07-28" {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
		t.Fatalf("the upstream never saw the operator's cancellation: %v", err)
	}
	if got := c.get(id); str(got["status"]) != "cancelled" {
		t.Errorf("the client sees %v after the operator's cancel", got)
	}
}

// A store that cannot open for now (another process holds its directory)
// makes health answer 503 with the reason, and the task routes 503, while
// the rest of Caddy runs. (A directory that can never work fails the load
// instead: TestStoreFailsEarly.)
func TestAdminHealthStoreUnavailable(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	dir, release := heldStore(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, StorageDir: dir})
	var h adminHealth
	code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil)
	_ = json.Unmarshal([]byte(body), &h)
	if code != http.StatusServiceUnavailable || h.Healthy || len(h.Stores) != 1 || h.Stores[0].Open || h.Stores[0].Error == "" {
		t.Errorf("health = %d %s, want 503 naming the store's problem", code, body)
	}
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks", nil); code != http.StatusServiceUnavailable {
		t.Errorf("list = %d %s, want 503", code, body)
	}
	if strings.Contains(h.Stores[0].Error, "not open yet") {
		t.Errorf("health names no cause: %q, want why the store could not be opened", h.Stores[0].Error)
	}
	// The command prints the unhealthy report as a table with the store's
	// error, as it prints a healthy one, and exits 1.
	out, errOut, ok := runCaddy(t, "mcp-tasks", "health", "--address", gw.adminAddr)
	storeRow := slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
		return slices.Equal(strings.Fields(line), []string{dir, "false", "false", "false", "0"})
	})
	if ok || !strings.HasPrefix(out, "STORE") || !storeRow || !strings.Contains(out, dir+": "+h.Stores[0].Error) ||
		!strings.Contains(errOut, "not healthy") || strings.Contains(errOut, `"healthy":false`) {
		t.Errorf("caddy mcp-tasks health of an unhealthy store: ok=%v\n%s\n%s\nwant exit 1, the table with the store's error", ok, out, errOut)
	}
	// A client meanwhile hears what a store that became unavailable
	// answers: 503, Retry-After, and a reference the log's warning has.
	req, _ := http.NewRequest(http.MethodPost, gw.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var m struct {
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(answer, &m)
	ref, found := strings.CutPrefix(m.Error.Message, "task store unavailable; retry later (ref ")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || m.Error.Code != -32603 || !found {
		t.Errorf("a request while the store cannot open: HTTP %d, Retry-After %q, %s; want 503, Retry-After and -32603 \"task store unavailable; retry later (ref …)\"",
			resp.StatusCode, resp.Header.Get("Retry-After"), answer)
	} else {
		ref = strings.TrimSuffix(ref, ")")
		waitFor(t, 10*time.Second, "the warning with ref "+ref, func() bool { return strings.Contains(gw.logs(), `"ref":"`+ref+`"`) })
	}
	// Once the store can be opened, the probe alone sees it come back: no
	// MCP request is needed to retry the start.
	release()
	waitFor(t, 30*time.Second, "health to turn 200", func() bool {
		code, _ := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", nil)
		return code == http.StatusOK
	})
}

// With two stores in use, a listing names one with ?store=, and a lookup by
// id finds the task in whichever store has it.
func TestAdminSeveralStores(t *testing.T) {
	t.Parallel()
	_, upAddr := testUpstream(t)
	home := t.TempDir()
	storeA, storeB := filepath.Join(home, "store-a"), filepath.Join(home, "store-b")
	gw := &gateway{t: t, home: home, addr: freeAddr(t), adminAddr: freeAddr(t)}
	siteB := freeAddr(t)
	port := func(a string) string { return a[strings.LastIndexByte(a, ':')+1:] }
	config := filepath.Join(home, "Caddyfile")
	cfg := fmt.Sprintf(`{
	admin %s
	persist_config off
	auto_https off
}

http://:%s {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir %s
	}
	reverse_proxy /mcp* %s
}

http://:%s {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir %s
	}
	reverse_proxy /mcp* %s
}
`, gw.adminAddr, port(gw.addr), storeA, upAddr, port(siteB), storeB, upAddr)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	gw.proc = startProcessEnv(t, gw.env(), gw.addr, caddyBinary, "run", "--config", config, "--adapter", "caddyfile")
	// Both stores open when the configuration starts, before any request.
	waitFor(t, 30*time.Second, "both stores healthy", func() bool {
		var h adminHealth
		code, _ := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/health", &h)
		return code == http.StatusOK && len(h.Stores) == 2
	})
	b := newRPCClient(t, "http://"+siteB+"/mcp")
	b.initialize("")
	task := b.createTask("slow_compute", map[string]any{"seconds": 0.01}, 60000)

	code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks", nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "?store=") || !strings.Contains(body, storeA) || !strings.Contains(body, storeB) {
		t.Errorf("list without ?store= = %d %s, want 400 naming both stores", code, body)
	}
	for _, tt := range []struct {
		store string
		want  []string
	}{{storeA, nil}, {storeB, []string{task.TaskID}}} {
		var page adminPage
		if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks?store="+tt.store, &page); code != http.StatusOK {
			t.Fatalf("list of %s: %d %s", tt.store, code, body)
		}
		if fmt.Sprint(ids(page.Tasks)) != fmt.Sprint(tt.want) || page.Store != tt.store {
			t.Errorf("list of %s = %+v, want %v", tt.store, page, tt.want)
		}
	}
	var v adminTaskView
	if code, body := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks/"+task.TaskID, &v); code != http.StatusOK || v.Store != storeB {
		t.Errorf("show = %d %s, want the task in %s", code, body, storeB)
	}

	// The command: without --store it says how to name one; a store's
	// directory may be given relative to where the operator stands.
	caddyIn := func(dir string, args ...string) (string, string, error) {
		cmd := exec.Command(caddyBinary, args...)
		cmd.Dir = dir
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	if _, errOut, err := caddyIn(home, "mcp-tasks", "list", "--address", gw.adminAddr); err == nil || !strings.Contains(errOut, "--store") {
		t.Errorf("caddy mcp-tasks list with two stores: err %v, stderr %q, want a failure that names --store", err, errOut)
	}
	out, errOut, err := caddyIn(home, "mcp-tasks", "list", "--address", gw.adminAddr, "--store", "store-b")
	if err != nil || !strings.Contains(out, task.TaskID) {
		t.Errorf("caddy mcp-tasks list --store store-b (relative, from %s): err %v\n%s%s, want the task", home, err, out, errOut)
	}
}

// heldStore returns a Badger store directory that this test process holds
// open, as another process would: a gateway on it cannot open its store.
// release lets it go (at once, failing the test if it cannot); the test's
// cleanup releases it otherwise.
func heldStore(t *testing.T) (dir string, release func()) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "store")
	holder, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeHolder := func() (err error) {
		once.Do(func() { err = holder.Close() })
		return err
	}
	t.Cleanup(func() { _ = closeHolder() })
	return dir, func() {
		if err := closeHolder(); err != nil {
			t.Fatal(err)
		}
	}
}
