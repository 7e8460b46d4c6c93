package badgerstore

import (
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"
	"testing"
)

// The free-space probe reads a different system call, and different
// fields, on each system: the files that do it type-check for every system
// Caddy is built for, not only for the one the tests run on (a build for
// FreeBSD or OpenBSD failed on a field's type and name). They are checked
// alone, with what they use of the package declared, so that no
// dependency is compiled for another system.
//
//nolint:paralleltest // sets go/build's default context, which the source importer reads
func TestDiskFreeBuildsOnEverySystem(t *testing.T) {
	saved := build.Default
	t.Cleanup(func() { build.Default = saved })
	for _, goos := range []string{"linux", "darwin", "freebsd", "openbsd", "netbsd", "dragonfly", "illumos", "windows"} {
		t.Run(goos, func(t *testing.T) {
			ctxt := saved
			ctxt.GOOS, ctxt.GOARCH, ctxt.CgoEnabled = goos, "amd64", false
			build.Default = ctxt
			fset := token.NewFileSet()
			files := []*ast.File{}
			names, err := filepath.Glob("disk*.go")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range names {
				if strings.HasSuffix(name, "_test.go") || name == "diskguard.go" {
					continue
				}
				if ok, err := ctxt.MatchFile(".", name); err != nil || !ok {
					continue
				}
				f, err := parser.ParseFile(fset, name, nil, 0)
				if err != nil {
					t.Fatal(err)
				}
				files = append(files, f)
			}
			stub, err := parser.ParseFile(fset, "stub.go", "package badgerstore\nvar errFreeUnknown error\n", 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, stub)
			conf := types.Config{Importer: importer.ForCompiler(fset, "source", nil)}
			pkg, err := conf.Check("badgerstore", fset, files, nil)
			if err != nil {
				t.Fatalf("%s: %v", goos, err)
			}
			for _, fn := range []string{"freeBytes", "allocated"} {
				if pkg.Scope().Lookup(fn) == nil {
					t.Errorf("%s: no %s", goos, fn)
				}
			}
		})
	}
}

// The free space of a filesystem is its available blocks times their size:
// none for a deficit, and never a product that wrapped around past uint64
// (a filesystem reporting unlimited space read as a full one).
func TestBlocksBytes(t *testing.T) {
	t.Parallel()
	const maxU = ^uint64(0)
	tests := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"blocks", blocksBytes(int64(1000), 4096), 4096000},
		{"unsigned blocks", blocksBytes(uint64(1000), 512), 512000},
		{"a deficit", blocksBytes(int64(-20), 4096), 0},
		{"none", blocksBytes(uint32(0), 4096), 0},
		{"a product past uint64", blocksBytes(int64(1)<<52, 4096), maxU},
		{"unlimited, signed", blocksBytes(int64(^uint64(0)>>1), 4096), maxU},
		{"unlimited, unsigned", blocksBytes(maxU, 4096), maxU},
		{"the largest that fits", blocksBytes(maxU/4096, 4096), maxU / 4096 * 4096},
		{"no block size", blocksBytes(maxU, 0), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}
