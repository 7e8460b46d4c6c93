package sse

import (
	"os/exec"
	"strings"
	"testing"
)

// The package is a leaf of the module's layers: it imports nothing else of
// the module, so that every layer above can use it.
func TestImportsNothingOfTheModule(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const module = "github.com/caddy-mcp-tasks/caddy-mcp-tasks/"
	const self = module + "taskproxy/sse"
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, module) && dep != self {
			t.Errorf("sse imports %s: a leaf package imports nothing of the module", dep)
		}
	}
}
