package caddymodule

import (
	"runtime/debug"
	"strings"
	"testing"
)

// The version report names the module as the build resolved it: a
// fetched version, a replace by a directory as (devel), the revision when
// go build stamped one, and says so when the binary has no build info.
func TestVersionReport(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want []string
	}{
		{"no build info", nil, []string{"caddy-mcp-tasks " + Version + "\n", "module: no build info\n"}},
		{"fetched", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "caddy"},
			Deps:      []*debug.Module{{Path: "example.com/other", Version: "v1.0.0"}, {Path: ownModulePath, Version: "v0.4.0", Sum: "h1:x"}},
		}, []string{"module: " + ownModulePath + " v0.4.0\n", "go: go1.26.8\n"}},
		{"replaced by a checkout", &debug.BuildInfo{
			Main: debug.Module{Path: "caddy"},
			Deps: []*debug.Module{{Path: ownModulePath, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "/src/caddy-mcp-tasks"}}},
		}, []string{"module: " + ownModulePath + " v0.0.0-00010101000000-000000000000 => /src/caddy-mcp-tasks (devel)\n"}},
		{"the main module, stamped", &debug.BuildInfo{
			Main:     debug.Module{Path: ownModulePath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}},
		}, []string{"module: " + ownModulePath + " (devel)\n", "revision: abc123 (modified)\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out strings.Builder
			if err := newVersionReport(tc.bi).write(&out); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("printed %q, want it to contain %q", out.String(), w)
				}
			}
		})
	}
}
