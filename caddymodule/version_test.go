package caddymodule

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
)

// The version report names the module as the build resolved it: a
// fetched version, a replace by a directory as (devel), the revision when
// go build stamped one, and says so when the binary has no build info. A
// binary stamped with the hash of its sources (./xcaddy.sh build, which
// reuses a binary built from the same sources in another checkout) names
// them by it, never by the directory the build ran in.
func TestVersionReport(t *testing.T) {
	t.Parallel()
	replaced := &debug.BuildInfo{
		Main: debug.Module{Path: "caddy"},
		Deps: []*debug.Module{{Path: ownModulePath, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "/src/caddy-mcp-tasks"}}},
	}
	for _, tc := range []struct {
		name    string
		bi      *debug.BuildInfo
		sources string
		want    []string
		notWant []string
	}{
		{"no build info", nil, "", []string{"caddy-mcp-tasks " + Version + "\n", "module: no build info\n"}, []string{"sources:"}},
		{"fetched", &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Main:      debug.Module{Path: "caddy"},
			Deps:      []*debug.Module{{Path: "example.com/other", Version: "v1.0.0"}, {Path: ownModulePath, Version: "v0.4.0", Sum: "h1:x"}},
		}, "", []string{"module: " + ownModulePath + " v0.4.0\n", "go: go1.26.8\n"}, nil},
		{"fetched, stamped", &debug.BuildInfo{
			Deps: []*debug.Module{{Path: ownModulePath, Version: "v0.4.0", Sum: "h1:x"}},
		}, "0123456789abcdef", []string{"module: " + ownModulePath + " v0.4.0\n", "sources: 0123456789abcdef "}, nil},
		{"replaced by a checkout", replaced, "", []string{"module: " + ownModulePath + " v0.0.0-00010101000000-000000000000 => /src/caddy-mcp-tasks (devel)\n"}, []string{"sources:"}},
		{"replaced by a checkout, as go reports it, stamped with its sources", &debug.BuildInfo{
			Deps: []*debug.Module{{Path: ownModulePath, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "/src/caddy-mcp-tasks", Version: "(devel)"}}},
		}, "0123456789abcdef", []string{"=> a checkout (devel)\n"}, []string{"/src/caddy-mcp-tasks"}},
		{"replaced by a checkout, stamped with its sources", replaced, "0123456789abcdef", []string{
			"module: " + ownModulePath + " v0.0.0-00010101000000-000000000000 => a checkout (devel)\n",
			"sources: 0123456789abcdef (./xcaddy.sh build's source hash)\n",
		}, []string{"/src/caddy-mcp-tasks"}},
		{"the main module, stamped", &debug.BuildInfo{
			Main:     debug.Module{Path: ownModulePath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}},
		}, "", []string{"module: " + ownModulePath + " (devel)\n", "revision: abc123 (modified)\n"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep := newVersionReport(tc.bi, tc.sources)
			var out strings.Builder
			if err := rep.write(&out); err != nil {
				t.Fatal(err)
			}
			js, err := json.Marshal(rep)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("printed %q, want it to contain %q", out.String(), w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out.String(), w) || strings.Contains(string(js), w) {
					t.Errorf("printed %q and %s, want neither to contain %q", out.String(), js, w)
				}
			}
			if tc.sources != "" && !strings.Contains(string(js), `"sources":"`+tc.sources+`"`) {
				t.Errorf("--json printed %s, want the sources %s", js, tc.sources)
			}
		})
	}
}
