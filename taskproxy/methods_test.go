package taskproxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestMethodsPerType keeps the core's seams small types: no
// type of taskproxy or its packages declares more than 25 methods, the
// Gateway at most 15, and a store backend's Store, which only puts its
// seams together, at most 6. Methods are counted as declared in non-test
// files, with a pointer receiver or not; methods promoted from embedded
// types do not count.
func TestMethodsPerType(t *testing.T) {
	t.Parallel()
	counts := declaredMethods(t, ".")
	limits := map[string]int{".Gateway": 15, "badgerstore.Store": 6, "pgstore.Store": 6}
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		limit, ok := limits[name]
		if !ok {
			limit = 25
		}
		if n := len(counts[name]); n > limit {
			t.Errorf("%s declares %d methods, more than %d: %s", name, n, limit, strings.Join(counts[name], ", "))
		}
	}
	for name := range limits {
		if _, ok := counts[name]; !ok {
			t.Errorf("no methods found for %s: the limits name a type that moved", name)
		}
	}
}

// declaredMethods maps each receiver type of the non-test files below dir,
// as "package-directory.Type" ("." for the root), to its methods' names.
func declaredMethods(t *testing.T, dir string) map[string][]string {
	t.Helper()
	fset := token.NewFileSet()
	counts := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := filepath.Base(filepath.Dir(path))
		if filepath.Dir(path) == "." {
			pkg = ""
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
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
				key := pkg + "." + id.Name
				counts[key] = append(counts[key], fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the sources below %s: %v", dir, err)
	}
	if len(counts) == 0 {
		t.Fatalf("no methods found below %s", dir)
	}
	return counts
}
