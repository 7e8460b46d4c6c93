package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// consoleAdminOrigins lets a browser open the console by typing its
// address: such a navigation carries neither Origin nor Referer, which
// Caddy's admin endpoint refuses by default (it checks the origin of every
// request a browser marks with Sec-Fetch-Mode). The empty origin admits it;
// every POST a browser sends carries an Origin, still checked.
func consoleAdminOrigins(adminAddr string) string {
	port := adminAddr[strings.LastIndexByte(adminAddr, ':')+1:]
	return fmt.Sprintf(`origins localhost:%s 127.0.0.1:%s [::1]:%s ""`, port, port, port)
}

// The console in a real headless Chromium, against the real Caddy with
// tasks made through the gateway by two principals: the list shows them
// with their statuses, the status filter and the tenant filter narrow it,
// pages of two walk the list, a task's page shows its history (opened with
// the keyboard) or its input round, and the cancel button, once its
// confirmation is accepted, cancels a working task as its owner then sees
// through tasks/get. A cross-origin POST to the same route is refused.
func TestConsole(t *testing.T) {
	t.Parallel()
	ctx := startBrowser(t) // first: skips before anything starts when there is no browser
	up, addr := testUpstream(t)
	adminAddr := freeAddr(t)
	gw := startGatewayWithAdmin(t, adminAddr, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth,
		AdminOptions: consoleAdminOrigins(adminAddr)})

	alice := newRPCClient(t, gw.URL)
	alice.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	alice.initialize("")
	bob := newRPCClient(t, gw.URL)
	bob.header.Set("Authorization", "Bearer "+hmacToken(t, "bob", "t2"))
	bob.initialize("")

	done := alice.createTask("slow_compute", map[string]any{"seconds": 0.01}, 600000)
	waitFor(t, 30*time.Second, "alice's quick task to complete", func() bool { return alice.getTask(done.TaskID).Status == "completed" })
	failed := bob.createTask("protocol_error_job", map[string]any{}, 600000)
	waitFor(t, 30*time.Second, "bob's protocol_error_job to fail", func() bool { return bob.getTask(failed.TaskID).Status == "failed" })
	asks := alice.createTask("confirm_delete", map[string]any{"filename": "notes.txt"}, 600000)
	waitFor(t, 30*time.Second, "alice's confirm_delete to ask for input", func() bool { return alice.getTask(asks.TaskID).Status == "input_required" })
	toCancel := alice.createTask("slow_compute", map[string]any{"seconds": 600, "label": "alice-long"}, 600000)
	kept := bob.createTask("slow_compute", map[string]any{"seconds": 600, "label": "bob-long"}, 600000)
	upCtx, cancelUp := context.WithTimeout(context.Background(), time.Minute)
	defer cancelUp()
	if err := up.WaitCalls(upCtx, "slow_compute", 3); err != nil {
		t.Fatal(err)
	}

	// What the admin endpoint serves the browser: the page, under its policy.
	resp, err := httpClient.Get("http://" + adminAddr + "/mcp_tasks/ui/")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET /mcp_tasks/ui/ = %d, Content-Security-Policy %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}

	consoleURL := "http://" + adminAddr + "/mcp_tasks/ui/"
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleURL)); err != nil {
		t.Fatalf("opening %s: %v", consoleURL, err)
	}
	// Listening starts once the tab is up: chromedp opens the tab with the
	// first action, and two first actions at once would race to.
	dialogs := make(chan string, 4)
	go func() {
		for ev, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			dialogs <- ev.Message
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()

	const rowsJS = `[...document.querySelectorAll('#tasks tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))`
	statusOf := func(rows [][]string) map[string]string {
		out := map[string]string{}
		for _, r := range rows {
			if len(r) > 1 {
				out[r[0]] = r[1]
			}
		}
		return out
	}
	want := map[string]string{
		done.TaskID:     "completed",
		failed.TaskID:   "failed",
		asks.TaskID:     "input_required, 1 input open, running here",
		toCancel.TaskID: "working, running here",
		kept.TaskID:     "working, running here",
	}
	rows := waitPage(t, ctx, "the four tasks with their statuses", rowsJS, func(rows [][]string) bool {
		got := statusOf(rows)
		for id, status := range want {
			if got[id] != status {
				return false
			}
		}
		return len(rows) == len(want)
	})
	for _, r := range rows {
		if r[0] == failed.TaskID && (r[2] != "bob" || r[3] != "t2" || r[4] != "protocol_error_job" || !strings.Contains(r[9], "error -32")) {
			t.Errorf("bob's failed task shows %q, want principal, tenant, tool and its error", r)
		}
	}
	stores := waitPage(t, ctx, "the store's health", `[...document.querySelectorAll('#stores tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))`,
		func(rows [][]string) bool { return len(rows) == 1 && len(rows[0]) > 2 && rows[0][2] == "healthy" })
	if stores[0][0] != gw.opts.StorageDir || stores[0][1] != "badger" {
		t.Errorf("stores table = %q, want the Badger store %s", stores, gw.opts.StorageDir)
	}
	screenshot(t, ctx, "console-list.png")

	// The status filter narrows the list to the working tasks; the tenant
	// filter to bob's.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("f-status"), "working"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "only the working tasks", rowsJS, func(rows [][]string) bool {
		got := statusOf(rows)
		return len(rows) == 2 && got[toCancel.TaskID] != "" && got[kept.TaskID] != ""
	})
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("f-status"), ""),
		chromedp.SendKeys(chromedp.ID("f-tenant"), "t2"+kb.Enter),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "only tenant t2's tasks", rowsJS, func(rows [][]string) bool {
		got := statusOf(rows)
		return len(rows) == 2 && got[failed.TaskID] == "failed" && got[kept.TaskID] != ""
	})
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#filters button[type=reset]`))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "every task again", rowsJS, func(rows [][]string) bool { return len(rows) == len(want) })

	// Pages of two (a page size the form does not offer, added for the
	// test): Older walks the cursors, Newer comes back.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('f-limit').add(new Option('2')), 'added'`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("f-limit"), "2"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)),
	); err != nil {
		t.Fatal(err)
	}
	newestFirst := []string{kept.TaskID, toCancel.TaskID, asks.TaskID, failed.TaskID, done.TaskID}
	idsOf := func(rows [][]string) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r[0])
		}
		return out
	}
	const pageJS = `({rows: [...document.querySelectorAll('#tasks tbody tr')].map(tr => tr.cells[0].textContent),
		older: document.getElementById('older').disabled, newer: document.getElementById('newer').disabled})`
	type pageState struct {
		Rows         []string
		Older, Newer bool // disabled
	}
	for i, wantIDs := range [][]string{newestFirst[:2], newestFirst[2:4], newestFirst[4:]} {
		if i > 0 {
			if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("older"))); err != nil {
				t.Fatal(err)
			}
		}
		last := i == 2
		waitPage(t, ctx, fmt.Sprintf("page %d of two tasks", i+1), pageJS, func(p pageState) bool {
			return slices.Equal(p.Rows, wantIDs) && p.Older == last && p.Newer == (i == 0)
		})
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("newer"))); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "page 2 again", pageJS, func(p pageState) bool { return slices.Equal(p.Rows, newestFirst[2:4]) })
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("f-limit"), "50"),
		chromedp.Click(chromedp.CSS(`#filters button[type=submit]`)),
	); err != nil {
		t.Fatal(err)
	}
	rows = waitPage(t, ctx, "every task on one page", rowsJS, func(rows [][]string) bool { return len(rows) == len(want) })
	if got := idsOf(rows); !slices.Equal(got, newestFirst) {
		t.Errorf("the list shows %v, want newest first %v", got, newestFirst)
	}

	// A task's page, opened from the keyboard: its fields and history.
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.CSS(fmt.Sprintf(`a[data-task=%q]`, done.TaskID)), kb.Enter)); err != nil {
		t.Fatal(err)
	}
	const historyJS = `document.getElementById('detail').hidden ? [] :
		[...document.querySelectorAll('#history tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))`
	waitPage(t, ctx, "the completed task's history", historyJS, func(rows [][]string) bool {
		return slices.ContainsFunc(rows, func(r []string) bool { return len(r) == 4 && r[1] == "working" && r[2] == "completed" })
	})
	const fieldsJS = `Object.fromEntries([...document.querySelectorAll('#fields dt')].map(dt => [dt.textContent, dt.nextElementSibling.textContent]))`
	fields := waitPage(t, ctx, "the task's fields", fieldsJS, func(f map[string]string) bool { return f["Status"] != "" })
	if fields["Principal"] != "alice" || fields["Tenant"] != "t1" || fields["Tool"] != "slow_compute" || fields["Status"] != "completed" || fields["Protocol"] != "2025-11-25" {
		t.Errorf("the completed task's fields = %v", fields)
	}
	if _, shown := fields["Trace id"]; shown {
		t.Errorf("a task without a trace id shows one: %v", fields)
	}
	hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('cancel').hidden`))
	if err != nil || !hidden {
		t.Errorf("the cancel button of a completed task is shown (hidden %v, %v)", hidden, err)
	}

	// A task waiting for input shows its input round.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#detail a[href="#"]`)),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[data-task=%q]`, asks.TaskID))),
	); err != nil {
		t.Fatal(err)
	}
	const inputsJS = `document.getElementById('detail').hidden ? [] :
		[...document.querySelectorAll('#inputs tbody tr')].map(tr => [...tr.cells].map(td => td.textContent))`
	waitPage(t, ctx, "the input round of confirm_delete", inputsJS, func(rows [][]string) bool {
		return len(rows) == 1 && len(rows[0]) == 4 && rows[0][2] == "elicitation/create" && rows[0][3] == "no"
	})

	// Cancel, with the confirmation accepted, from the working task's page.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`#detail a[href="#"]`)),
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`a[data-task=%q]`, toCancel.TaskID))),
	); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the working task's page", fieldsJS, func(f map[string]string) bool {
		return strings.HasPrefix(f["Status"], "working")
	})
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.ID("cancel"))); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-dialogs:
		if !strings.Contains(msg, toCancel.TaskID) {
			t.Errorf("the confirmation asks %q, want it to name the task", msg)
		}
	case <-ctx.Done():
		t.Fatal("no confirmation before the cancel")
	}
	waitPage(t, ctx, "the page to show the task cancelled", fieldsJS, func(f map[string]string) bool {
		return strings.HasPrefix(f["Status"], "cancelled")
	})
	waitPage(t, ctx, "the cancelled history", historyJS, func(rows [][]string) bool {
		return slices.ContainsFunc(rows, func(r []string) bool { return len(r) == 4 && r[1] == "working" && r[2] == "cancelled" })
	})
	screenshot(t, ctx, "console-task.png")
	if got := alice.getTask(toCancel.TaskID); got.Status != "cancelled" {
		t.Errorf("the owner's tasks/get answers %+v after the console's cancel", got)
	}
	if err := up.WaitCancellations(upCtx, "slow_compute", 1); err != nil {
		t.Errorf("the upstream never saw the console's cancel: %v", err)
	}

	// The same POST from another origin is refused, by Caddy's admin
	// endpoint, before the route: bob's task keeps working.
	for _, tt := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"another origin", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Mode": "cors"}, http.StatusForbidden},
		{"another origin, no Sec-Fetch headers", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"another host (DNS rebinding)", map[string]string{"Host": "evil.example:" + adminAddr[strings.LastIndexByte(adminAddr, ':')+1:]}, http.StatusForbidden},
		{"no-cors mode", map[string]string{"Origin": "http://" + adminAddr, "Sec-Fetch-Mode": "no-cors"}, http.StatusBadRequest},
	} {
		req, err := http.NewRequest("POST", "http://"+adminAddr+"/mcp_tasks/tasks/"+kept.TaskID+"/cancel", nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tt.headers {
			if k == "Host" {
				req.Host = v
			} else {
				req.Header.Set(k, v)
			}
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s: cancel answered %d %s, want %d", tt.name, resp.StatusCode, body, tt.status)
		}
	}
	if got := bob.getTask(kept.TaskID); got.Status != "working" {
		t.Errorf("bob's task after the refused cross-origin cancels: %+v, want working", got)
	}
}

// screenshot saves a PNG of the whole page in the test's directory, and in
// MCP_TASKS_CONSOLE_SCREENSHOTS when set (how the README's picture is
// made).
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dirs := []string{t.TempDir()}
	if d := os.Getenv("MCP_TASKS_CONSOLE_SCREENSHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.WriteFile(filepath.Join(d, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshot %s: %d bytes", name, len(png))
}
