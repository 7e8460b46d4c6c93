package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// withReplacer gives r a replacer, as Caddy's server does, with the given
// static placeholders.
func withReplacer(r *http.Request, vars map[string]string) *http.Request {
	repl := caddy.NewReplacer()
	for k, v := range vars {
		repl.Set(k, v)
	}
	return r.WithContext(context.WithValue(r.Context(), caddy.ReplacerCtxKey, repl))
}

// A principal placeholder must name exact text: a name with invalid UTF-8
// is refused as an empty one is, with the same 401 and JSON-RPC body,
// because the store would keep it as U+FFFD, another principal's name.
func TestPlaceholderPrincipalRefusesInvalidUTF8(t *testing.T) {
	p := newPlaceholderPrincipal("{http.auth.user.id}", "site a.example.com")
	for _, tc := range []struct {
		who  string
		want string // "": accepted; else a fragment of the 401's body
	}{
		{who: "victim"},
		{who: "victim\ufffd"},
		{who: "victim\U0001F600"},
		{who: "", want: "no authenticated principal"},
		{who: "victim\xff", want: "not valid UTF-8"},
		{who: "victim\xed\xb2\x80", want: "not valid UTF-8"}, // a surrogate half in UTF-8
		{who: "victim\xc0\xaf", want: "not valid UTF-8"},     // overlong
	} {
		t.Run(strconv.QuoteToASCII(tc.who), func(t *testing.T) {
			r := withReplacer(httptest.NewRequest(http.MethodPost, "/mcp", nil), map[string]string{"http.auth.user.id": tc.who})
			w := httptest.NewRecorder()
			got := p.authenticate(w, r)
			if tc.want == "" {
				if got == nil {
					t.Fatalf("refused: HTTP %d %s", w.Code, w.Body)
				}
				return
			}
			if got != nil {
				t.Fatal("accepted")
			}
			if w.Code != http.StatusUnauthorized || w.Header().Get("Content-Type") != "application/json" ||
				!strings.Contains(w.Body.String(), `"code":-32600`) || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("HTTP %d %q %s, want 401 with a -32600 error saying %q", w.Code, w.Header().Get("Content-Type"), w.Body, tc.want)
			}
		})
	}
}

// A CORS preflight passes to the next handler unauthenticated; under auth
// jwt the placeholders the gateway would set expand to nothing there, not
// to their own text, nor to what an earlier handler put in them.
func TestPreflightClearsIdentityPlaceholders(t *testing.T) {
	for _, tc := range []struct {
		name  string
		authn interface {
			authenticate(http.ResponseWriter, *http.Request) *http.Request
		}
		before map[string]string
		want   string
	}{
		{name: "auth jwt", authn: &authenticator{}, want: ""},
		{name: "auth jwt after another handler", authn: &authenticator{}, before: map[string]string{"http.auth.user.id": "victim"}, want: ""},
		// principal: the earlier handler that sets the placeholder owns it.
		{name: "principal", authn: newPlaceholderPrincipal("{http.auth.user.id}", "x"), before: map[string]string{"http.auth.user.id": "alice"}, want: "alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Handler{authn: tc.authn}
			req := httptest.NewRequest(http.MethodOptions, "/mcp", nil)
			req.Header.Set("Origin", "https://app.example.com")
			req.Header.Set("Access-Control-Request-Method", "POST")
			req = withReplacer(req, tc.before)
			var got string
			next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
				repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
				got = repl.ReplaceKnown("{"+"http.auth.user.id"+"}", "")
				return nil
			})
			if err := h.ServeHTTP(httptest.NewRecorder(), req, next); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("{%s} expands to %q on a preflight, want %q", "http.auth.user.id", got, tc.want)
			}
		})
	}
}
