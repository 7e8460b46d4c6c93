package caddymodule

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile" // the caddyfile adapter
	"github.com/caddyserver/caddy/v2/caddytest"
)

// updateGolden rewrites the expected JSON of the golden files from the
// adapter's output: go test -run TestCaddyfileAdapt -update-golden
// ./caddymodule. Read the diff before committing it.
var updateGolden = flag.Bool("update-golden", false, "rewrite the expected JSON of testdata/caddyfile_adapt/*.caddytest")

// TestCaddyfileAdapt adapts each testdata/caddyfile_adapt/*.caddytest file
// (a Caddyfile, a line of ten dashes, the expected JSON), as caddy-l4 and
// Caddy itself do. It only adapts: nothing is provisioned or started.
func TestCaddyfileAdapt(t *testing.T) {
	files, err := filepath.Glob("testdata/caddyfile_adapt/*.caddytest")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files found")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			in, want, ok := strings.Cut(strings.ReplaceAll(string(data), "\r\n", "\n"), "----------")
			if !ok {
				t.Fatalf("%s: no ---------- separator", file)
			}
			in = strings.TrimSpace(in) + "\n"
			if *updateGolden {
				out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(in), nil)
				if err != nil {
					t.Fatalf("adapting %s: %v", file, err)
				}
				pretty, err := indentJSON(out)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(in+"----------\n"+pretty+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !caddytest.CompareAdapt(t, file, in, "caddyfile", strings.TrimSpace(want)) {
				t.Errorf("%s: the adapted JSON differs from the expected one", file)
			}
		})
	}
}
