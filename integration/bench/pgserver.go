package main

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

const (
	pgClients      = 32 // HTTP clients of the gateway measurements
	pgbenchClients = 4
	// The finished tasks polled: a working set that the caches of finished
	// tasks mostly hold (the view cache of 2 MiB per wire, about 5000 tasks;
	// pgstore's 8 MiB of records), as when clients poll the tasks they have
	// just created; and more than they hold, so that most reads go to the
	// store.
	pgPolled       = 10_000
	pgPolledBeyond = 40_000
)

// restartDurable restarts the throwaway cluster of dsn (pgtest's layout:
// its data directory under the socket directory) with PostgreSQL's default
// durability: pgtest turns fsync, synchronous commit and full-page writes
// off on the server's command line, which no ALTER SYSTEM can override.
func restartDurable(dsn string) error {
	var dir, port string
	for f := range strings.FieldsSeq(dsn) {
		if v, ok := strings.CutPrefix(f, "host="); ok {
			dir = v
		}
		if v, ok := strings.CutPrefix(f, "port="); ok {
			port = v
		}
	}
	bin, err := pgtest.FindBinDir()
	if err != nil || dir == "" || port == "" {
		return fmt.Errorf("restarting the bench cluster durable (dsn %q): %w", dsn, err)
	}
	args := []string{filepath.Join(bin, "pg_ctl"), "-D", filepath.Join(dir, "data"), "-w", "-t", "120", "-m", "fast", "restart",
		"-l", filepath.Join(dir, "server.log"), // else the server holds our output pipe open
		"-o", fmt.Sprintf("-p %s -k %s -c listen_addresses='' -c max_connections=200", port, dir)}
	cmd := exec.Command(args[0], args[1:]...)
	if os.Geteuid() == 0 { // the cluster belongs to postgres, as pgtest runs it
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...)
	}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl restart with durable settings: %w\n%s", err, out)
	}
	return nil
}

// pgbenchRun is one run of pgbench: its TPS, and the CPU of pgbench's own
// process (the server's is measured apart).
type pgbenchRun struct {
	tps float64
	cpu time.Duration
}

// initPgbench initializes pgbench's tables in the database of dsn; the
// function it returns runs pgbench's simple-update script for d.
func initPgbench(dsn string) (func(d time.Duration) (pgbenchRun, error), error) {
	bin, err := pgtest.FindBinDir()
	pgbench := filepath.Join(bin, "pgbench")
	if err != nil {
		if pgbench, err = exec.LookPath("pgbench"); err != nil {
			return nil, fmt.Errorf("pgbench not found: %w", err)
		}
	}
	if out, err := exec.Command(pgbench, "-i", "-q", dsn).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	tpsLine := regexp.MustCompile(`tps = ([0-9.]+)`)
	return func(d time.Duration) (pgbenchRun, error) {
		secs := max(1, int(d.Seconds()))
		cmd := exec.Command(pgbench, "-N", "-T", fmt.Sprint(secs), "-c", fmt.Sprint(pgbenchClients), "-j", "2", dsn)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return pgbenchRun{}, fmt.Errorf("pgbench: %w\n%s", err, out)
		}
		run := pgbenchRun{cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
		m := tpsLine.FindSubmatch(out)
		if m == nil {
			return pgbenchRun{}, fmt.Errorf("no tps in pgbench's output:\n%s", out)
		}
		_, err = fmt.Sscan(string(m[1]), &run.tps)
		return run, err
	}, nil
}

// withDatabase returns dsn (URL or key=value form) naming database name.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parsing the DSN: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	re := regexp.MustCompile(`\bdbname=\S+`)
	if re.MatchString(dsn) {
		return re.ReplaceAllString(dsn, "dbname="+name), nil
	}
	return dsn + " dbname=" + name, nil
}
