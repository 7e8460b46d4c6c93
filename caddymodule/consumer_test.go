package caddymodule

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// toolModules are the modules of the commands this repository builds and
// lints itself with (xcaddy, golangci-lint). They are pinned in
// .ci/tools/go.mod; in go.mod they would be requirements of the module and
// so enter the module graph of every build that plugs it in.
var toolModules = []string{
	"github.com/caddyserver/xcaddy",
	"github.com/golangci/golangci-lint",
}

// networkFailures are what the go command says when it cannot reach the
// module proxy or the checksum database.
var networkFailures = []string{
	"dial tcp",
	"no such host",
	"connection refused",
	"network is unreachable",
	"i/o timeout",
	"TLS handshake timeout",
	"GOPROXY=off",
}

// TestConsumerModuleGraphHasNoTools builds the module graph that a user
// gets from `xcaddy build --with .../caddymodule`: a module of their own
// that requires this one (replaced by the checkout, as it is not fetched
// from anywhere here) and imports caddymodule. No requirement of this
// module may lead to a tool module. Some of Caddy's own dependencies
// require golangci-lint for their development, so the graph as a whole may
// name it; the edges from this module may not.
func TestConsumerModuleGraphHasNoTools(t *testing.T) {
	t.Parallel()
	root, modPath, goVersion := moduleRoot(t)

	dir := t.TempDir()
	const pseudo = "v0.0.0-00010101000000-000000000000"
	gomod := fmt.Sprintf("module example.com/consumer\n\ngo %s\n\nrequire %s %s\n\nreplace %s => %s\n",
		goVersion, modPath, pseudo, modPath, root)
	mainGo := fmt.Sprintf("package main\n\nimport _ %q\n\nfunc main() {}\n", modPath+"/caddymodule")
	// The module's own checksums cover every module the consumer needs,
	// so tidy has nothing to look up that this checkout did not.
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatalf("reading the module's go.sum: %v", err)
	}
	for name, body := range map[string][]byte{"go.mod": []byte(gomod), "main.go": []byte(mainGo), "go.sum": sums} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatalf("writing the consumer's %s: %v", name, err)
		}
	}

	if out, err := goCommand(dir, "mod", "tidy"); err != nil {
		for _, f := range networkFailures {
			if strings.Contains(out, f) {
				t.Skipf("go mod tidy in a consumer module cannot reach the module proxy (%s); this test needs it:\n%s", f, out)
			}
		}
		t.Fatalf("go mod tidy in a consumer module: %v\n%s", err, out)
	}
	graph, err := goCommand(dir, "mod", "graph")
	if err != nil {
		t.Fatalf("go mod graph in a consumer module: %v\n%s", err, graph)
	}

	var fromModule, tools []string
	for line := range strings.Lines(graph) {
		from, to, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if modulePath(from) != modPath {
			continue
		}
		fromModule = append(fromModule, to)
		for _, tool := range toolModules {
			if p := modulePath(to); p == tool || strings.HasPrefix(p, tool+"/") {
				tools = append(tools, to)
			}
		}
	}
	// The graph must show this module's requirements at all, or the check
	// below would pass on a graph that never read its go.mod.
	if len(fromModule) == 0 {
		t.Fatalf("the consumer's module graph has no requirement of %s:\n%s", modPath, graph)
	}
	if len(tools) > 0 {
		t.Errorf("%s brings tool modules into a consumer's module graph: %s\n"+
			"pin tools in .ci/tools/go.mod (go tool -modfile=.ci/tools/go.mod), not in go.mod",
			modPath, strings.Join(tools, ", "))
	}
}

// moduleRoot returns the directory, path and go version of the module the
// test runs in.
func moduleRoot(t *testing.T) (dir, path, goVersion string) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}\n{{.Path}}\n{{.GoVersion}}")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("go list -m: %v\n%s", err, out)
	}
	fields := strings.Split(strings.TrimSpace(out), "\n")
	if len(fields) != 3 {
		t.Fatalf("go list -m printed %q, want a directory, a path and a go version", out)
	}
	return fields[0], fields[1], fields[2]
}

// goCommand runs the go command in dir with the module settings of a plain
// user's build: no workspace, modules fetched as needed, and the toolchain
// the test runs with.
func goCommand(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// modulePath is the path of a "path@version" node of go mod graph.
func modulePath(node string) string {
	path, _, _ := strings.Cut(node, "@")
	return path
}
