package pgstore

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
)

// TestMethodsPerType keeps the store split into small types by concern
// (issue 18): no type of the package declares more than 25 methods, and
// Store, which only puts the seams together, far fewer. Methods are
// counted as declared in the package's non-test files, with a pointer
// receiver or not; methods promoted from embedded seams do not count.
func TestMethodsPerType(t *testing.T) {
	counts := declaredMethods(t, ".")
	tests := []struct {
		name     string
		typeName string // "" is every type
		max      int
	}{
		{"any type", "", 25},
		{"Store", "Store", 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			names := make([]string, 0, len(counts))
			for name := range counts {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				if tt.typeName != "" && name != tt.typeName {
					continue
				}
				if n := len(counts[name]); n > tt.max {
					t.Errorf("%s declares %d methods, more than %d: %s", name, n, tt.max, strings.Join(counts[name], ", "))
				}
			}
		})
	}
}

// declaredMethods maps each receiver type of the non-test files in dir
// to the names of its methods.
func declaredMethods(t *testing.T, dir string) map[string][]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	fset := token.NewFileSet()
	counts := map[string][]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, dir+"/"+name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing %s: %v", name, err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || len(fn.Recv.List) == 0 {
				continue
			}
			recv := fn.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if idx, ok := recv.(*ast.IndexExpr); ok { // a generic type
				recv = idx.X
			}
			if id, ok := recv.(*ast.Ident); ok {
				counts[id.Name] = append(counts[id.Name], fn.Name.Name)
			}
		}
	}
	if len(counts) == 0 {
		t.Fatalf("no methods found in %s", dir)
	}
	return counts
}
