// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb
// into a temporary directory, a server listening only on a unix socket in
// that directory, a database, and everything removed at Stop. The server
// runs as user postgres when the tests run as root (PostgreSQL refuses to
// run as root). MCP_TASKS_TEST_DSN names an existing server instead.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names an existing server to test against instead of a throwaway
// cluster. The tests create and drop schemas of their own in it.
const EnvDSN = "MCP_TASKS_TEST_DSN"

// Server is a PostgreSQL server for tests.
type Server struct {
	// DSN connects to the test database.
	DSN string
	dir string
	bin string
	// opts are the server options of pg_ctl start, kept for StartServer.
	opts    string
	durable bool
}

// FindBinDir returns the directory of the newest installed PostgreSQL
// server binaries (Debian's layout, /usr/lib/postgresql/<major>/bin), or
// of initdb on PATH.
func FindBinDir() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool { return majorOf(matches[i]) > majorOf(matches[j]) })
	if len(matches) > 0 {
		return filepath.Dir(matches[0]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", errors.New("PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin/initdb, no initdb on PATH): " +
		"install them (apt-get install -y postgresql; ./xcaddy.sh test does this as root) or set " + EnvDSN + " to a server")
}

func majorOf(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Start returns the server of EnvDSN when it is set, and otherwise starts a
// cluster from the binaries in binDir ("" to find them).
func Start(binDir string) (*Server, error) { return start(binDir, false) }

// StartDurable is Start with commits that are synchronous, as a production
// server's are: a commit is acknowledged once its WAL reached the
// operating system, so that an immediate (crash) shutdown of the server
// keeps every acknowledged commit. The clusters of Start answer sooner and
// may lose the last commits in such a crash. (fsync stays off: the
// machine is not expected to crash.)
func StartDurable(binDir string) (*Server, error) { return start(binDir, true) }

func start(binDir string, durable bool) (*Server, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		return &Server{DSN: dsn}, nil
	}
	if binDir == "" {
		var err error
		if binDir, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(binDir, "initdb")); err != nil {
		return nil, fmt.Errorf("no initdb in %s: %w", binDir, err)
	}
	dir, err := os.MkdirTemp(parentDir(), "mcp-tasks-pg-")
	if err != nil {
		return nil, fmt.Errorf("making the cluster directory: %w", err)
	}
	s := &Server{dir: dir, bin: binDir, durable: durable}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) start() error {
	if os.Geteuid() == 0 {
		// PostgreSQL refuses root; the cluster belongs to user postgres.
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("running as root needs a postgres user to run the server: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return fmt.Errorf("handing the cluster directory to postgres: %w", err)
		}
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	// Only the unix socket in the private directory: nothing listens on
	// the network. Durability is pointless for a throwaway cluster.
	commit := "off"
	if s.durable {
		commit = "on"
	}
	s.opts = fmt.Sprintf("-p %d -k %s -c listen_addresses='' -c fsync=off -c synchronous_commit=%s -c full_page_writes=off -c max_connections=200", port, s.dir, commit)
	if err := s.StartServer(); err != nil {
		return err
	}
	admin := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", s.dir, port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return fmt.Errorf("connecting to the test cluster: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE mcp_tasks_test"); err != nil {
		return fmt.Errorf("creating the test database: %w", err)
	}
	s.DSN = strings.Replace(admin, "dbname=postgres", "dbname=mcp_tasks_test", 1)
	return nil
}

// run runs one of the server's programs, as postgres when we are root.
func (s *Server) run(name string, args ...string) ([]byte, error) {
	prog := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
	} else {
		cmd = exec.Command(prog, args...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

// parentDir is where the cluster directory goes: the usual temporary
// directory, unless we are root and user postgres could not reach it (a
// TMPDIR under /root); then /tmp, which everyone can.
func parentDir() string {
	dir := os.TempDir()
	if os.Geteuid() != 0 {
		return dir
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

// freePort returns a TCP port nobody listens on. The server only uses it to
// name its socket file, in a directory of its own, so a race is harmless.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops a cluster Start made and removes its directory; a server of
// EnvDSN is left alone.
func (s *Server) Stop() {
	if s == nil || s.dir == "" {
		return
	}
	if _, err := os.Stat(filepath.Join(s.dir, "data", "postmaster.pid")); err == nil {
		_, _ = s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	}
	_ = os.RemoveAll(s.dir)
}
