package taskproxy

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// crossSystems are the systems besides Linux whose builds of the tests are
// checked: Windows, the one without Unix's system calls. (macOS builds
// them too, checked by hand; a second system would double the test's cost
// on a cold build cache.)
var crossSystems = []string{"windows"}

// The module's packages build with their tests and benchmarks for Windows
// (and macOS), not only for the Linux the tests run on: a test file that uses
// a system call only Unix has (getrusage, the blocks of a Stat_t, a socket
// option on an int descriptor) breaks go test and go vet there. The
// packages at risk are those whose files, tests included, import syscall or
// golang.org/x/sys; each is vetted for each system (vetting type-checks the
// test files too). The end-to-end tests (integration/) are Linux-only by
// design and left out, and so are the packages that import Caddy
// (caddymodule): compiling all of Caddy's dependencies for another system
// takes minutes on a cold build cache, as every CI run has. With the cache
// warm this takes a second or two; cold, about half a minute.
func TestTestsBuildOnWindows(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var atRisk []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], module+"integration") ||
			slices.ContainsFunc(fields[1:], func(imp string) bool { return strings.HasPrefix(imp, "github.com/caddyserver/caddy/") }) {
			continue
		}
		if slices.ContainsFunc(fields[1:], func(imp string) bool {
			return imp == "syscall" || strings.HasPrefix(imp, "golang.org/x/sys/")
		}) {
			atRisk = append(atRisk, fields[0])
		}
	}
	// The selection finds what it should: the store backend's tests read
	// the process's CPU time and the disk space a file takes.
	if !slices.Contains(atRisk, module+"taskproxy/badgerstore") {
		t.Fatalf("the packages importing syscall, %v, miss taskproxy/badgerstore", atRisk)
	}
	for _, goos := range crossSystems {
		t.Run(goos, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("go", append([]string{"vet"}, atRisk...)...)
			cmd.Env = append(os.Environ(), "GOOS="+goos)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("GOOS=%s go vet %s: %v\n%s", goos, strings.Join(atRisk, " "), err, out)
			}
		})
	}
}
