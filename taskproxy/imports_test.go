package taskproxy

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/caddy-mcp-tasks/caddy-mcp-tasks/"

// importRules are the layers of the core, lowest first: the packages of
// the module each may import (directly or through another package), and
// other packages it must never import (tests aside: the core's own tests
// open a Badger store). The leaves import nothing of the module; jsonrpc
// only the scanner; calls to the next handler only what is below them; the
// task model and the store backends only jsonrpc and the scanner below them
// (so a backend never reaches the core); the task model keeps a task's
// trace context as W3C header strings, without OpenTelemetry, which the
// runtime and the layers above it use; the core knows no store backend,
// no Caddy and not auth/.
var importRules = []struct {
	pkg       string
	allowed   []string // packages of the module, by prefix; nil means any
	forbidden []string // packages outside the module, by prefix
}{
	{"taskproxy/internal/jsonx", []string{}, nil},
	{"taskproxy/sse", []string{}, nil},
	{"taskproxy/internal/runners", []string{}, nil},
	{"taskproxy/internal/cputime", []string{}, nil},
	{"taskproxy/jsonrpc", []string{"taskproxy/internal/jsonx"}, []string{"net/http"}},
	{"taskproxy/internal/upstream", []string{"taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/sse", "taskproxy/internal/runners"}, nil},
	{"taskproxy/internal/gate", []string{"taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/sse", "taskproxy/internal/runners"}, nil},
	{"taskproxy/internal/translate", []string{"taskproxy/jsonrpc", "taskproxy/internal/jsonx"}, []string{"net/http"}},
	{"taskproxy/task", []string{"taskproxy/jsonrpc", "taskproxy/internal/jsonx"}, []string{"net/http", "go.uber.org/zap", "go.opentelemetry.io"}},
	{"taskproxy/internal/wire", []string{"taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/internal/gate", "taskproxy/internal/translate", "taskproxy/internal/runtime", "taskproxy/internal/follow", "taskproxy/internal/rpcerr", "taskproxy/internal/runners", "taskproxy/sse"}, []string{"github.com/caddyserver/caddy"}},
	{"taskproxy/internal/wire/v2025", []string{"taskproxy/internal/wire", "taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/internal/gate", "taskproxy/internal/translate", "taskproxy/internal/runtime", "taskproxy/internal/follow", "taskproxy/internal/rpcerr", "taskproxy/internal/runners", "taskproxy/sse"}, []string{module + "taskproxy/internal/wire/v2026", "github.com/caddyserver/caddy"}},
	{"taskproxy/internal/wire/v2026", []string{"taskproxy/internal/wire", "taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/internal/gate", "taskproxy/internal/translate", "taskproxy/internal/runtime", "taskproxy/internal/follow", "taskproxy/internal/rpcerr", "taskproxy/internal/runners", "taskproxy/sse"}, []string{module + "taskproxy/internal/wire/v2025", "github.com/caddyserver/caddy"}},
	{"taskproxy/internal/bridge", []string{"taskproxy/internal/wire", "taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/internal/gate", "taskproxy/internal/translate", "taskproxy/internal/runtime", "taskproxy/internal/follow", "taskproxy/internal/rpcerr", "taskproxy/internal/runners", "taskproxy/sse"}, []string{module + "taskproxy/internal/wire/v2025", "github.com/caddyserver/caddy"}},
	{"taskproxy/internal/bridge/v2025on2026", []string{"taskproxy/internal/wire", "taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/internal/gate", "taskproxy/internal/translate", "taskproxy/internal/runtime", "taskproxy/internal/follow", "taskproxy/internal/rpcerr", "taskproxy/internal/runners", "taskproxy/sse"}, []string{module + "taskproxy/internal/wire/v2026", "github.com/caddyserver/caddy"}},
	{"taskproxy/internal/rpcerr", []string{"taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/internal/runners", "taskproxy/sse"}, []string{"github.com/caddyserver/caddy"}},
	{"taskproxy/internal/follow", []string{"taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/internal/translate", "taskproxy/internal/rpcerr", "taskproxy/internal/runners", "taskproxy/sse"}, []string{"github.com/caddyserver/caddy"}},
	{"taskproxy/internal/runtime", []string{"taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx", "taskproxy/internal/upstream", "taskproxy/internal/translate", "taskproxy/internal/follow", "taskproxy/internal/rpcerr", "taskproxy/internal/runners", "taskproxy/sse"}, []string{"github.com/caddyserver/caddy"}},
	{"taskproxy/badgerstore", []string{"taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx"}, []string{"github.com/caddyserver/caddy"}},
	{"taskproxy/pgstore", []string{"taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx"}, []string{"github.com/caddyserver/caddy"}},
	{"taskproxy/storetest", []string{"taskproxy/task", "taskproxy/jsonrpc", "taskproxy/internal/jsonx"}, []string{"github.com/caddyserver/caddy"}},
	{"taskproxy", []string{"taskproxy"}, []string{"github.com/dgraph-io/badger", "github.com/jackc/pgx", "github.com/caddyserver/caddy"}},
}

// forbiddenDep says why a package with these rules may not import dep, or "".
// A forbidden entry wins over an allowed one: the 2026-07-28 package may use
// internal/wire but not internal/wire/v2025 below it.
func forbiddenDep(allowed, forbidden []string, dep string) string {
	for _, bad := range forbidden {
		if dep == bad || strings.HasPrefix(dep, bad+"/") {
			return "a package its layer may not use"
		}
	}
	if rest, ok := strings.CutPrefix(dep, module); ok {
		if allowed == nil {
			return ""
		}
		for _, a := range allowed {
			if rest == a || strings.HasPrefix(rest, a+"/") {
				if a == "taskproxy" && (strings.HasPrefix(rest, "taskproxy/badgerstore") || strings.HasPrefix(rest, "taskproxy/pgstore")) {
					return "the core knows no store backend"
				}
				return ""
			}
		}
		return "a package of the module its layer may not use"
	}
	return ""
}

func TestImportRules(t *testing.T) {
	t.Parallel()
	for _, rule := range importRules {
		t.Run(rule.pkg, func(t *testing.T) {
			t.Parallel()
			out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+rule.pkg).Output()
			if err != nil {
				t.Fatalf("go list %s: %v", rule.pkg, err)
			}
			deps := strings.Fields(string(out))
			if len(deps) == 0 {
				t.Fatal("go list names no packages")
			}
			for _, dep := range deps {
				if dep == module+rule.pkg {
					continue
				}
				if why := forbiddenDep(rule.allowed, rule.forbidden, dep); why != "" {
					t.Errorf("%s imports %s: %s", rule.pkg, dep, why)
				}
			}
		})
	}
}

// The rules catch what they must: a check of the checker.
func TestForbiddenDep(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pkg       string
		allowed   []string
		forbidden []string
		dep       string
		refused   bool
	}{
		{"taskproxy/sse", []string{}, nil, module + "taskproxy", true},
		{"taskproxy/sse", []string{}, nil, "net/http", false},
		{"taskproxy/jsonrpc", []string{"taskproxy/internal/jsonx"}, []string{"net/http"}, module + "taskproxy/internal/jsonx", false},
		{"taskproxy/jsonrpc", []string{"taskproxy/internal/jsonx"}, []string{"net/http"}, "net/http", true},
		{"taskproxy/jsonrpc", []string{"taskproxy/internal/jsonx"}, []string{"net/http"}, "net/http/httptrace", true},
		{"taskproxy/jsonrpc", []string{"taskproxy/internal/jsonx"}, []string{"net/http"}, "net/netip", false},
		{"taskproxy", []string{"taskproxy"}, nil, module + "taskproxy/badgerstore", true},
		{"taskproxy/internal/wire/v2026", []string{"taskproxy/internal/wire"}, []string{module + "taskproxy/internal/wire/v2025"}, module + "taskproxy/internal/wire", false},
		{"taskproxy/internal/wire/v2026", []string{"taskproxy/internal/wire"}, []string{module + "taskproxy/internal/wire/v2025"}, module + "taskproxy/internal/wire/v2025", true},
		{"taskproxy/internal/bridge", []string{"taskproxy/internal/wire"}, []string{module + "taskproxy/internal/wire/v2025"}, module + "taskproxy/internal/wire/v2026", false},
		{"taskproxy", []string{"taskproxy"}, nil, module + "auth", true},
		{"taskproxy", []string{"taskproxy"}, nil, module + "taskproxy/sse", false},
		{"taskproxy", []string{"taskproxy"}, []string{"github.com/caddyserver/caddy"}, "github.com/caddyserver/caddy/v2", true},
		{"taskproxy/task", []string{"taskproxy/jsonrpc"}, []string{"go.opentelemetry.io"}, "go.opentelemetry.io/otel/trace", true},
		{"taskproxy/internal/runtime", []string{"taskproxy/task"}, []string{"github.com/caddyserver/caddy"}, "go.opentelemetry.io/otel/trace", false},
	}
	for _, tt := range tests {
		if got := forbiddenDep(tt.allowed, tt.forbidden, tt.dep) != ""; got != tt.refused {
			t.Errorf("%s importing %s: refused %v, want %v", tt.pkg, tt.dep, got, tt.refused)
		}
	}
}
