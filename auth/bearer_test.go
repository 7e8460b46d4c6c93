package auth

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

func TestBearerToken(t *testing.T) {
	t.Parallel()
	const tok = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhIn0.c2ln-_+/=="
	tests := []struct {
		name        string
		headers     []string // Authorization values
		wantToken   string
		wantPresent bool
		wantErr     error
	}{
		{name: "missing header"},
		{name: "Bearer", headers: []string{"Bearer " + tok}, wantToken: tok, wantPresent: true},
		{name: "lowercase bearer", headers: []string{"bearer " + tok}, wantToken: tok, wantPresent: true},
		{name: "mixed case, extra spaces", headers: []string{"  BeArEr   " + tok + " "}, wantToken: tok, wantPresent: true},
		{name: "wrong scheme", headers: []string{"Basic dXNlcjpwYXNz"}, wantErr: ErrMissingToken},
		{name: "scheme prefix only", headers: []string{"Bearerx " + tok}, wantErr: ErrMissingToken},
		{name: "empty header", headers: []string{""}, wantErr: ErrMissingToken},
		{name: "empty token", headers: []string{"Bearer "}, wantPresent: true, wantErr: ErrInvalidToken},
		{name: "token with space", headers: []string{"Bearer abc def"}, wantPresent: true, wantErr: ErrInvalidToken},
		{name: "token with quote", headers: []string{`Bearer abc"def`}, wantPresent: true, wantErr: ErrInvalidToken},
		{name: "only padding", headers: []string{"Bearer =="}, wantPresent: true, wantErr: ErrInvalidToken},
		{name: "several headers", headers: []string{"Bearer " + tok, "Bearer " + tok}, wantPresent: true, wantErr: ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, "/mcp?access_token="+tok, nil)
			for _, h := range tt.headers {
				r.Header.Add("Authorization", h)
			}
			got, present, err := BearerToken(r)
			if got != tt.wantToken || present != tt.wantPresent {
				t.Errorf("BearerToken = %q, %v; want %q, %v", got, present, tt.wantToken, tt.wantPresent)
			}
			if (err == nil) != (tt.wantErr == nil) || (err != nil && !errors.Is(err, tt.wantErr)) {
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "abc") {
				t.Errorf("error %q quotes the header", err)
			}
		})
	}
}

func TestBearerTokenLeavesBodyUntouched(t *testing.T) {
	t.Parallel()
	form := url.Values{"access_token": {"from-form"}, "x": {"1"}}.Encode()
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(form))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	tok, present, err := BearerToken(r)
	if tok != "" || present || err != nil {
		t.Fatalf("BearerToken = %q, %v, %v; want no token", tok, present, err)
	}
	if r.Form != nil || r.PostForm != nil {
		t.Fatal("BearerToken parsed the form")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil || string(body) != form {
		t.Fatalf("body after BearerToken = %q, %v; want %q", body, err, form)
	}
}

func TestChallenge(t *testing.T) {
	t.Parallel()
	expired := classify(jwt.ErrTokenExpired, true)
	tests := []struct {
		name                       string
		err                        error
		realm, resourceMetadataURL string
		want                       string
	}{
		{name: "missing token", err: ErrMissingToken, realm: "mcp",
			want: `Bearer realm="mcp"`},
		{name: "wrong scheme", err: errSchemeNotBearer, realm: "mcp",
			want: `Bearer realm="mcp"`},
		{name: "nil error", realm: "mcp",
			want: `Bearer realm="mcp"`},
		{name: "missing token with resource metadata", err: ErrMissingToken, realm: "mcp",
			resourceMetadataURL: "https://gw.example/.well-known/oauth-protected-resource",
			want:                `Bearer realm="mcp", resource_metadata="https://gw.example/.well-known/oauth-protected-resource"`},
		{name: "invalid token", err: expired, realm: "mcp",
			want: `Bearer realm="mcp", error="invalid_token", error_description="token is expired"`},
		{name: "invalid token with resource metadata", err: expired, realm: "mcp", resourceMetadataURL: "https://gw.example/rm",
			want: `Bearer realm="mcp", error="invalid_token", error_description="token is expired", resource_metadata="https://gw.example/rm"`},
		{name: "quotes in description become single quotes", err: invalid(`tenant claim "t\x" is missing`, nil), realm: "mcp",
			want: `Bearer realm="mcp", error="invalid_token", error_description="tenant claim 't/x' is missing"`},
		{name: "foreign error text is not echoed", err: errors.New("eyJ secret stuff"), realm: "mcp",
			want: `Bearer realm="mcp", error="invalid_token", error_description="the access token is invalid"`},
		{name: "realm and URL escaping", err: ErrMissingToken, realm: `a "b" \c` + "\r\nX-Injected: 1",
			resourceMetadataURL: `https://gw.example/rm?q="x"`,
			want:                `Bearer realm="a \"b\" \\cX-Injected: 1", resource_metadata="https://gw.example/rm?q=\"x\""`},
		{name: "no realm", err: ErrMissingToken, want: "Bearer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Challenge(tt.err, tt.realm, tt.resourceMetadataURL); got != tt.want {
				t.Errorf("Challenge =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}
