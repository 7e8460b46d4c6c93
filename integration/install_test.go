package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
)

// moduleVersion is caddymodule.Version, read from its source: this package
// does not link Caddy.
func moduleVersion(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../caddymodule/version.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const Version = "([^"]+)"`).FindSubmatch(src)
	if m == nil {
		t.Fatal("caddymodule/version.go declares no const Version")
	}
	return string(m[1])
}

// manualFiles are the user documentation: the README and the references
// beside the code they document, relative to the repository root.
var manualFiles = []string{"README.md", "caddymodule/README.md", "taskproxy/README.md", "integration/README.md"}

// readManual returns the manual's files one after the other, so a test
// finds the block it checks in whichever file documents it.
func readManual(t *testing.T) []byte {
	t.Helper()
	var all []byte
	for _, name := range manualFiles {
		data, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatalf("reading the manual: %v", err)
		}
		all = append(append(all, data...), '\n')
	}
	return all
}

// readmeShBlock returns the manual's sh code block that contains marker.
func readmeShBlock(t *testing.T, marker string) string {
	t.Helper()
	data := readManual(t)
	for _, block := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		if strings.Contains(block[1], marker) {
			return block[1]
		}
	}
	t.Fatalf("README has no sh block with %q", marker)
	return ""
}

// shellWords is the first command of a shell snippet as words: comments
// dropped, continued lines joined. The README's commands quote nothing.
func shellWords(snippet string) []string {
	var b strings.Builder
	for line := range strings.Lines(snippet) {
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimRight(line, " \t\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		cont := strings.HasSuffix(line, `\`)
		b.WriteString(strings.TrimSuffix(line, `\`) + " ")
		if !cont {
			break
		}
	}
	return strings.Fields(b.String())
}

// readmeModules is what the README shows `caddy list-modules | grep mcp`
// print: the comment lines after that command.
func readmeModules(block string) []string {
	var mods []string
	_, after, _ := strings.Cut(block, "list-modules | grep mcp\n")
	for line := range strings.Lines(after) {
		mod, ok := strings.CutPrefix(strings.TrimSpace(line), "# ")
		if !ok {
			break
		}
		mods = append(mods, mod)
	}
	return mods
}

// mcpModules is what `caddy list-modules | grep mcp` prints for binary.
func mcpModules(t *testing.T, binary string) []string {
	t.Helper()
	out, err := exec.Command(binary, "list-modules").Output()
	if err != nil {
		t.Fatalf("%s list-modules: %v", binary, err)
	}
	var mods []string
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "mcp") {
			mods = append(mods, strings.TrimSpace(line))
		}
	}
	return mods
}

// The install path README.md documents is the one ./xcaddy.sh build runs,
// and it works: the checkout form is the very command of the script (its
// variables, Caddy version and flags), the module form names the same
// version and package, and building with the README's command gives a
// Caddy that lists the modules the README shows and prints the version.
// The build reuses the go build cache of ./xcaddy.sh build (about 9 s
// here, on the sources ./caddy was built from).
func TestInstallPathInREADME(t *testing.T) {
	t.Parallel()
	checkout := shellWords(readmeShBlock(t, "--replace"))
	// The script's command with no GONOPROXY, GOPRIVATE or GOVCS of this
	// machine's appended: the values the README shows.
	script := exec.Command("./xcaddy.sh", "build-command")
	script.Dir = ".."
	script.Env = append(os.Environ(), "GOENV=off", "GONOPROXY=", "GOPRIVATE=", "GOVCS=")
	out, err := script.Output()
	if err != nil {
		t.Fatalf("xcaddy.sh build-command: %v", err)
	}
	want := strings.Fields(string(out))
	if !slices.Equal(checkout, want) {
		t.Fatalf("README's checkout build\n  %q\nis not what xcaddy.sh builds with\n  %q", checkout, want)
	}
	xcaddyAt := slices.Index(checkout, "xcaddy")
	env, args := checkout[:xcaddyAt], checkout[xcaddyAt+1:]

	plain := readmeShBlock(t, "xcaddy build v")
	if got := shellWords(plain); !slices.Equal(got, []string{"xcaddy", "build", args[1], "--with", args[3]}) {
		t.Errorf("README's xcaddy build %q differs from the checkout form's version and package %q", got, args[:4])
	}

	binary := filepath.Join(t.TempDir(), "caddy")
	build := exec.Command("go", append([]string{"tool", "-modfile=.ci/tools/go.mod", "xcaddy"}, append(args, "--output", binary)...)...)
	build.Dir = ".."
	build.Env = append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the README's xcaddy build: %v\n%s", err, out)
	}
	if got, want := mcpModules(t, binary), readmeModules(plain); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("list-modules of the built Caddy shows %q, README shows %q", got, want)
	}
	version, err := exec.Command(binary, "mcp-tasks", "version").Output()
	if err != nil {
		t.Fatalf("caddy mcp-tasks version: %v", err)
	}
	if v := moduleVersion(t); !strings.Contains(string(version), "caddy-mcp-tasks "+v+"\n") {
		t.Errorf("caddy mcp-tasks version printed %q, want the release %s", version, v)
	}
}

// caddy mcp-tasks version prints the release, the store formats and the
// module as the build resolved it: lines for people, --json for scripts;
// the README's upgrade notes have a heading for the release.
func TestCommandVersion(t *testing.T) {
	t.Parallel()
	v := moduleVersion(t)
	stdout, stderr, ok := runCaddy(t, "mcp-tasks", "version", "--json")
	if !ok {
		t.Fatalf("caddy mcp-tasks version --json failed: %s", stderr)
	}
	var rep struct {
		Version      string `json:"version"`
		BadgerFormat uint64 `json:"badger_format"`
		Module       *struct {
			Path    string `json:"path"`
			Replace *struct {
				Path    string `json:"path"`
				Version string `json:"version"`
			} `json:"replace"`
		} `json:"module"`
		GoVersion string `json:"go_version"`
		Sources   string `json:"sources"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("caddy mcp-tasks version --json printed %q: %v", stdout, err)
	}
	// ./xcaddy.sh build stamps the hash of the sources and reuses a binary
	// built from the same sources in another checkout: the report names
	// the sources by that hash, never by the directory of a checkout.
	script := exec.Command("./xcaddy.sh", "source-hash")
	script.Dir = ".."
	hash, err := script.Output()
	if err != nil {
		t.Fatalf("xcaddy.sh source-hash: %v", err)
	}
	sources := strings.TrimSpace(string(hash))
	// A binary built otherwise (xcaddy by hand, say) carries no hash and
	// names its build as Go recorded it; only ./xcaddy.sh build's binary
	// is held to the hash.
	stamped := rep.Sources != ""
	if !stamped {
		t.Logf("%s carries no source hash: not built by ./xcaddy.sh build, so its report is not checked against this checkout", caddyBinary)
	}
	if stamped && rep.Sources != sources {
		t.Errorf("the binary's sources %q, want this checkout's source hash %q (is %s built from these sources?)", rep.Sources, sources, caddyBinary)
	}
	if stamped && rep.Module != nil && rep.Module.Replace != nil && rep.Module.Replace.Path != "" {
		t.Errorf("the module's replacement names the directory %q, which may be another checkout's", rep.Module.Replace.Path)
	}
	if rep.Version != v || rep.BadgerFormat != badgerstore.FormatVersion || rep.GoVersion == "" {
		t.Errorf("version %q, badger format %d, go %q; want %s, %d and a go version", rep.Version, rep.BadgerFormat, rep.GoVersion, v, badgerstore.FormatVersion)
	}
	// ./xcaddy.sh build replaces the module by the checkout: Go builds it
	// as (devel) from that directory.
	if rep.Module == nil || rep.Module.Path != "github.com/caddy-mcp-tasks/caddy-mcp-tasks" ||
		rep.Module.Replace == nil || rep.Module.Replace.Version != "(devel)" {
		t.Errorf("module build info %+v, want this module replaced by the checkout (devel)", rep.Module)
	}

	stdout, stderr, ok = runCaddy(t, "mcp-tasks", "version")
	if !ok {
		t.Fatalf("caddy mcp-tasks version failed: %s", stderr)
	}
	wants := []string{"caddy-mcp-tasks " + v + "\n", "module: github.com/caddy-mcp-tasks/caddy-mcp-tasks "}
	if stamped {
		wants = append(wants, " => a checkout (devel)\n", "sources: "+sources+" ")
	}
	for _, want := range wants {
		if !strings.Contains(stdout, want) {
			t.Errorf("caddy mcp-tasks version printed %q, want it to contain %q", stdout, want)
		}
	}
	if checkout, err := filepath.Abs(".."); stamped && (err != nil || strings.Contains(stdout, checkout)) {
		t.Errorf("caddy mcp-tasks version printed %q, naming the checkout %s (%v)", stdout, checkout, err)
	}

	readme := readManual(t)
	if !regexp.MustCompile(`(?m)^#### ` + regexp.QuoteMeta(v) + `\b`).Match(readme) {
		t.Errorf("README's upgrade notes have no heading #### %s", v)
	}
}

// ./xcaddy.sh build passes the caller's XCADDY_GO_BUILD_FLAGS on after its
// own, and a binary built with other flags is not the cached one built
// without them: the flags are part of the source hash.
func TestSourceHashCoversBuildFlags(t *testing.T) {
	t.Parallel()
	hashWith := func(flags string) string {
		t.Helper()
		script := exec.Command("./xcaddy.sh", "source-hash")
		script.Dir = ".."
		script.Env = append(os.Environ(), "XCADDY_GO_BUILD_FLAGS="+flags)
		out, err := script.Output()
		if err != nil {
			t.Fatalf("XCADDY_GO_BUILD_FLAGS=%q xcaddy.sh source-hash: %v", flags, err)
		}
		return strings.TrimSpace(string(out))
	}
	plain, race := hashWith(""), hashWith("-race")
	if plain == "" || plain == race {
		t.Errorf("source hash %q without flags and %q with -race: want two hashes", plain, race)
	}
}
