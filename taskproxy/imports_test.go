package taskproxy

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The core knows no store backend, no Caddy and not auth/ (DESIGN.md,
// "Packages"): no non-test file of this package imports one. Its own tests
// link a backend in from the external test package (store_link_test.go).
func TestCoreImportsNoBackend(t *testing.T) {
	forbidden := []string{
		"github.com/dgraph-io/badger",
		"github.com/jackc/pgx",
		"github.com/caddyserver/caddy",
		"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore",
		"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore",
		"github.com/caddy-mcp-tasks/caddy-mcp-tasks/auth",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if strings.HasPrefix(path, bad) {
					t.Errorf("%s imports %s: the core must not know a backend, Caddy or auth/", name, path)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
