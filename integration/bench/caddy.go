package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// caddyProc is a Caddy process under measurement.
type caddyProc struct {
	cmd   *exec.Cmd
	dir   string
	admin int
	// logFile holds what Caddy writes to stdout and stderr: its log, at
	// the level its Caddyfile sets.
	logFile string
}

// The bench measures Caddy with the logging a user gets who writes no log
// directive (the default logger, INFO, to stderr); logSilenced is the
// global option of the rows labelled "log silenced", and of the soak, whose
// log is read when something failed.
const (
	logDefault  = ""
	logSilenced = "\tlog {\n\t\tlevel WARN\n\t}\n"
)

// gatewayUnderTest starts the trivial upstream and a Caddy with one site:
// mcp_tasks (its store in a directory named for store, plus directives) in
// front of reverse_proxy. It returns the MCP endpoint and a stop function.
func gatewayUnderTest(cfg config, store, directives string) (*trivialUpstream, *caddyProc, string, func(), error) {
	return gatewayUnderTestGlobals(cfg, store, directives, logDefault)
}

// gatewayUnderTestGlobals is gatewayUnderTest with lines of Caddy's global
// options (as startCaddyEnv takes them).
func gatewayUnderTestGlobals(cfg config, store, directives, globals string) (*trivialUpstream, *caddyProc, string, func(), error) {
	up, err := startUpstream()
	if err != nil {
		return nil, nil, "", nil, err
	}
	port := freePort()
	sites := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n%s\n\t}\n\treverse_proxy /mcp* %s\n}",
		port, filepath.Join(cfg.work, store), directives, up.addr)
	p, err := startCaddyLogging(cfg.caddy, cfg.work, sites, globals, port)
	if err != nil {
		_ = up.srv.Close()
		return nil, nil, "", nil, err
	}
	stop := func() { p.stop(); _ = up.srv.Close() }
	return up, p, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), stop, nil
}

// freePort returns a loopback port nobody listens on now.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startCaddy runs bin on a Caddyfile whose sites are given, with Caddy's
// default logging; it waits until every port in waitPorts accepts
// connections.
func startCaddy(bin, work, sites string, waitPorts ...int) (*caddyProc, error) {
	return startCaddyLogging(bin, work, sites, logDefault, waitPorts...)
}

// startCaddyLogging is startCaddy with logging, the global log option
// (logDefault or logSilenced). Caddy's output goes to a file, as a
// service's would to its journal: the bench reads it only when Caddy fails.
func startCaddyLogging(bin, work, sites, logging string, waitPorts ...int) (*caddyProc, error) {
	return startCaddyEnv(bin, work, sites, logging, nil, waitPorts...)
}

// startCaddyEnv is startCaddyLogging with extra environment variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, say). logging is put into the global
// options block as it is: other global options may go with it.
func startCaddyEnv(bin, work, sites, logging string, env []string, waitPorts ...int) (*caddyProc, error) {
	dir, err := os.MkdirTemp(work, "caddy-")
	if err != nil {
		return nil, err
	}
	admin := freePort()
	cfg := fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tpersist_config off\n\tauto_https off\n%s}\n\n%s\n", admin, logging, sites)
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	p := &caddyProc{dir: dir, admin: admin, logFile: filepath.Join(dir, "caddy.log"),
		cmd: exec.Command(bin, "run", "--config", file, "--adapter", "caddyfile")}
	p.cmd.Env = append(append(os.Environ(), "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config")), env...)
	out, err := os.Create(p.logFile)
	if err != nil {
		return nil, fmt.Errorf("creating Caddy's log file: %w", err)
	}
	defer out.Close() // Caddy holds its own descriptor
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, port := range waitPorts {
		for {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				p.stop()
				return nil, fmt.Errorf("caddy not listening on %d: %w\n%s", port, err, p.logTail())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return p, nil
}

// profile records a CPU profile of the process for d into dir/name.pprof
// (when dir is set), through Caddy's admin endpoint; wait for the returned
// channel.
func (p *caddyProc) profile(dir, name string, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if dir == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		url := fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile?seconds=%d", p.admin, int(d.Seconds()))
		resp, err := http.Get(url)
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(dir, name+".pprof"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "profile:", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
	}()
	return done
}

// logTail returns the last 4000 bytes of Caddy's output.
func (p *caddyProc) logTail() string {
	const n = 4000
	f, err := os.Open(p.logFile)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if size := p.logSize(); size > n {
		_, _ = f.Seek(size-n, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	return string(data)
}

// logSize returns how many bytes Caddy has written to its output.
func (p *caddyProc) logSize() int64 {
	fi, err := os.Stat(p.logFile)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// rss returns the process's resident set size in bytes.
func (p *caddyProc) rss() int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// stop asks Caddy to exit, then kills it if it does not.
func (p *caddyProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
}

// allocated reads what the Go runtime of Caddy has allocated since it
// started, objects and bytes (expvar's memstats Mallocs and TotalAlloc):
// the difference of two readings is what the work between them allocated,
// whatever the load of the machine.
func (p *caddyProc) allocated() (objects, bytes uint64, err error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/vars", p.admin))
	if err != nil {
		return 0, 0, fmt.Errorf("reading Caddy's memstats: %w", err)
	}
	defer resp.Body.Close()
	var vars struct {
		Memstats struct{ Mallocs, TotalAlloc uint64 } `json:"memstats"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&vars); err != nil {
		return 0, 0, fmt.Errorf("reading Caddy's memstats: %w", err)
	}
	return vars.Memstats.Mallocs, vars.Memstats.TotalAlloc, nil
}

// heldMemory is what a Caddy process holds: its live Go heap after a
// forced collection, and its resident memory: anonymous, and the rest
// (mapped files).
type heldMemory struct {
	heap, anon, file int64 // bytes
	// stacks is the goroutines' stacks (memstats' StackInuse).
	stacks int64
}

// memoryNow forces a garbage collection through the admin endpoint (a
// heap profile with gc=1, saved as dir/name.pprof when dir is set), then
// reads the live heap (expvar's memstats) and the resident memory. The
// resident set alone moves with garbage the runtime has not yet returned
// and with the mapped file pages reads touched, so it is read beside what
// is live.
func (p *caddyProc) memoryNow(dir, name string) (heldMemory, error) {
	var m heldMemory
	get := func(path string) ([]byte, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", p.admin, path))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	heap, err := get("/debug/pprof/heap?gc=1")
	if err != nil {
		return m, fmt.Errorf("collecting Caddy's garbage: %w", err)
	}
	if dir != "" {
		if err := os.WriteFile(filepath.Join(dir, name+".pprof"), heap, 0o644); err != nil {
			return m, err
		}
	}
	data, err := get("/debug/vars")
	if err != nil {
		return m, fmt.Errorf("reading Caddy's memstats: %w", err)
	}
	var vars struct {
		Memstats struct{ HeapAlloc, StackInuse int64 } `json:"memstats"`
	}
	if err := json.Unmarshal(data, &vars); err != nil {
		return m, fmt.Errorf("reading Caddy's memstats: %w", err)
	}
	rss, anon := memory(p.cmd.Process.Pid)
	m.heap, m.anon, m.file, m.stacks = vars.Memstats.HeapAlloc, anon, rss-anon, vars.Memstats.StackInuse
	return m, nil
}
