package taskproxy

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/caddy-mcp-tasks/caddy-mcp-tasks/"

// importRules are the layers of the core, lowest first: what each package
// must never import, directly or through another package (tests aside: the
// core's own tests link a backend in from the external test package,
// store_link_test.go). The leaves import nothing of the module; the core
// knows no store backend, no Caddy and not auth/.
var importRules = []struct {
	pkg       string
	forbidden []string
}{
	{"taskproxy/internal/jsonx", []string{module}},
	{"taskproxy/sse", []string{module}},
	{"taskproxy", []string{
		"github.com/dgraph-io/badger",
		"github.com/jackc/pgx",
		"github.com/caddyserver/caddy",
		module + "taskproxy/badgerstore",
		module + "taskproxy/pgstore",
		module + "auth",
		module + "caddymodule",
	}},
}

func TestImportRules(t *testing.T) {
	for _, rule := range importRules {
		t.Run(rule.pkg, func(t *testing.T) {
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
				for _, bad := range rule.forbidden {
					if strings.HasPrefix(dep, bad) {
						t.Errorf("%s imports %s, which its layer forbids", rule.pkg, dep)
					}
				}
			}
		})
	}
}
