package caddymodule

import (
	"embed"
	"errors"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// The console: a page for operators over the admin routes, served under
// /mcp_tasks/ui/ from files embedded in the binary. It has no server side
// of its own: its script calls the JSON routes from the same origin, so
// Caddy's admin endpoint applies to them the Host and Origin checks it
// applies to every admin request, and the cancel button is the same POST a
// script or the CLI sends.
//
//go:embed console/index.html console/console.js console/console.css
var consoleFiles embed.FS

// consolePolicy is the Content-Security-Policy of the console's files:
// scripts, styles and requests from the admin origin only, no inline
// script or style, no framing (no clickjacking of the cancel button).
const consolePolicy = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

var consoleTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
}

// serveConsole answers GET (and HEAD) /mcp_tasks/ui/ with index.html and
// /mcp_tasks/ui/<file> with one of its files; /mcp_tasks/ui redirects to
// /mcp_tasks/ui/, the base of the page's relative links.
func serveConsole(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return apiError(http.StatusMethodNotAllowed, "method %s not allowed, use GET", r.Method)
	}
	if r.URL.Path == "/mcp_tasks/ui" {
		http.Redirect(w, r, "/mcp_tasks/ui/", http.StatusMovedPermanently)
		return nil
	}
	name := strings.TrimPrefix(r.URL.Path, "/mcp_tasks/ui/")
	if name == "" {
		name = "index.html"
	}
	typ, known := consoleTypes[path.Ext(name)]
	body, err := consoleFiles.ReadFile("console/" + name)
	if !known || strings.Contains(name, "/") || errors.Is(err, fs.ErrNotExist) {
		return apiError(http.StatusNotFound, "no such console file: %s", r.URL.Path)
	}
	if err != nil {
		return apiError(http.StatusInternalServerError, "reading the console's %s: %v", name, err)
	}
	h := w.Header()
	h.Set("Content-Type", typ)
	h.Set("Content-Security-Policy", consolePolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, err = w.Write(body)
	}
	return err
}
