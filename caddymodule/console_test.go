package caddymodule

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// The console's files come from the binary, each with its type and the
// Content-Security-Policy that forbids inline script and framing; other
// paths and methods are refused in the admin API's error shape.
func TestConsoleFiles(t *testing.T) {
	t.Parallel()
	a := &AdminAPI{}
	tests := []struct {
		method, path string
		status       int
		typ          string
		inBody       string
	}{
		{"GET", "/mcp_tasks/ui/", 200, "text/html", `<script type="module" src="console.js">`},
		{"GET", "/mcp_tasks/ui/index.html", 200, "text/html", "<table id=\"tasks\">"},
		{"GET", "/mcp_tasks/ui/console.js", 200, "text/javascript", "textContent"},
		{"GET", "/mcp_tasks/ui/console.css", 200, "text/css", "table"},
		{"HEAD", "/mcp_tasks/ui/console.js", 200, "text/javascript", ""},
		{"GET", "/mcp_tasks/ui", 301, "", ""},
		{"GET", "/mcp_tasks/ui/nothing.js", 404, "application/json", "no such console file"},
		{"GET", "/mcp_tasks/ui/console.go", 404, "application/json", "no such console file"},
		{"GET", "/mcp_tasks/ui/../admin.go", 404, "application/json", "no such"},
		{"POST", "/mcp_tasks/ui/", 405, "application/json", "use GET"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(tt.method, "http://localhost:2019/", nil)
			req.URL.Path = tt.path // as the admin mux hands it on, unclean paths included
			if err := a.serve(rec, req); err != nil {
				t.Fatalf("serve: %v", err)
			}
			body := rec.Body.String()
			if rec.Code != tt.status || !strings.HasPrefix(rec.Header().Get("Content-Type"), tt.typ) || !strings.Contains(body, tt.inBody) {
				t.Fatalf("%s %s = %d %q %.200s, want %d %s containing %q", tt.method, tt.path, rec.Code, rec.Header().Get("Content-Type"), body, tt.status, tt.typ, tt.inBody)
			}
			if tt.status == 301 && rec.Header().Get("Location") != "/mcp_tasks/ui/" {
				t.Errorf("redirect to %q, want /mcp_tasks/ui/", rec.Header().Get("Location"))
			}
			if tt.status == 200 {
				if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
					t.Errorf("Content-Security-Policy %q", csp)
				}
				if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
					t.Error("no X-Content-Type-Options: nosniff")
				}
			}
		})
	}
}

// The page runs under default-src 'self': no inline script, style or
// event handler (the policy would block them), every asset it names is
// one the binary serves, nothing from another origin, and the script puts
// task data in the page as text only.
func TestConsoleNoInlineCode(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		b, err := consoleFiles.ReadFile("console/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	page := read("index.html")
	for _, re := range []string{`<script(?:\s[^>]*)?>\s*[^<\s]`, `<style`, `\son[a-z]+\s*=`, `\sstyle\s*=`, `(?:src|href)="(?:https?:)?//`} {
		if m := regexp.MustCompile(re).FindString(page); m != "" {
			t.Errorf("index.html has %q (pattern %s)", m, re)
		}
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"#]+)"`).FindAllStringSubmatch(page, -1) {
		if _, err := consoleFiles.ReadFile("console/" + m[1]); err != nil {
			t.Errorf("index.html names %s, which the binary does not serve: %v", m[1], err)
		}
	}
	if !strings.Contains(page, `href="console.css" crossorigin`) {
		t.Error("the stylesheet must load in cors mode (crossorigin): Caddy's admin endpoint refuses no-cors requests")
	}
	script := read("console.js")
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		if strings.Contains(script, bad) {
			t.Errorf("console.js uses %s: task data must go in as text", bad)
		}
	}
}

// The listing's filters by tenant, route and age, and their errors.
func TestListFilter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	f, err := listFilter(url.Values{"tenant": {"t1"}, "route": {"srv0#0"}, "max_age": {"1h"}, "min_age": {"90s"}, "status": {"working"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	if f.Tenant != "t1" || f.Route != "srv0#0" || f.Status != "working" ||
		!f.CreatedAfter.Equal(now.Add(-time.Hour)) || !f.CreatedBefore.Equal(now.Add(-90*time.Second)) {
		t.Errorf("filter = %+v", f)
	}
	tests := []struct {
		q     url.Values
		about string
	}{
		{url.Values{"status": {"done"}}, "status"},
		{url.Values{"max_age": {"an hour"}}, "max_age"},
		{url.Values{"min_age": {"-5m"}}, "min_age"},
		{url.Values{"max_age": {"0s"}}, "max_age"},
		{url.Values{"max_age": {"1s"}, "min_age": {"1h"}}, "no task can match"},
		{url.Values{"max_age": {"1h"}, "min_age": {"1h"}}, "no task can match"},
	}
	for _, tt := range tests {
		_, err := listFilter(tt.q, now)
		var apiErr caddy.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatus != http.StatusBadRequest || !strings.Contains(err.Error(), tt.about) {
			t.Errorf("%v: %v, want a 400 about %s", tt.q, err, tt.about)
		}
	}
}
