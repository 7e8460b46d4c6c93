package gate

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
)

// Header finds what Header.Get finds for a canonical key, however the
// header was set.
func TestHeader(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("mcp-session-id", "a")
	h.Add("MCP-SESSION-ID", "b")
	h.Set("content-type", "application/json")
	for _, key := range []string{upstream.HeaderSessionID, "Content-Type", "Origin", upstream.HeaderProtocolVersion} {
		if got, want := Header(h, key), h.Get(key); got != want {
			t.Errorf("Header(%s) = %q, Get gives %q", key, got, want)
		}
	}
}

// Every header name the module's code looks up in a header map without
// canonicalising it (Header, or an index of a Header map) is written in
// canonical form: otherwise the lookup finds nothing where Get would.
func TestHeaderKeysCanonical(t *testing.T) {
	t.Parallel()
	constants := map[string]string{
		"upstream.HeaderSessionID":       upstream.HeaderSessionID,
		"upstream.HeaderProtocolVersion": upstream.HeaderProtocolVersion,
	}
	fset := token.NewFileSet()
	seen := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var key ast.Expr
			switch n := n.(type) {
			case *ast.CallExpr: // Header(h, key), gate.Header(h, key)
				if name := calleeName(n.Fun); name == "Header" || name == "gate.Header" {
					if len(n.Args) == 2 {
						key = n.Args[1]
					}
				}
			case *ast.IndexExpr: // r.Header[key], w.Header()[key]
				if isHeaderMap(n.X) {
					key = n.Index
				}
			}
			if key == nil {
				return true
			}
			seen++
			var name string
			switch k := key.(type) {
			case *ast.BasicLit:
				name, _ = strconv.Unquote(k.Value)
			case *ast.SelectorExpr:
				c, ok := constants[calleeName(k)]
				if !ok {
					return true // not a header name constant this test knows: a variable
				}
				name = c
			default:
				return true
			}
			if name != http.CanonicalHeaderKey(name) {
				t.Errorf("%s: header %q looked up without canonicalising, written as %q", fset.Position(key.Pos()), name, http.CanonicalHeaderKey(name))
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("found no header lookups: the walk missed the code")
	}
}

// calleeName is "pkg.Name" or "Name" of an identifier or selector.
func calleeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok {
			return x.Name + "." + e.Sel.Name
		}
		return e.Sel.Name
	}
	return ""
}

// isHeaderMap reports whether e reads as a header map: x.Header or
// x.Header().
func isHeaderMap(e ast.Expr) bool {
	if c, ok := e.(*ast.CallExpr); ok {
		e = c.Fun
	}
	s, ok := e.(*ast.SelectorExpr)
	return ok && s.Sel.Name == "Header"
}
