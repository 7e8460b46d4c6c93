package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// A task store that cannot work until an operator changes something (a
// storage directory under a file or on a read-only filesystem, a database
// that does not exist, credentials the server refuses, a user that may not
// create the schema, a schema a newer gateway migrated) fails caddy
// validate, caddy run and caddy reload, with a message that names the
// directory or database and says what to do, instead of a Caddy that
// answers 503 "task store unavailable" to every request. A database that is
// only down when Caddy starts still lets it start, and the store opens once
// the database answers.

// storeFailConfig is a Caddyfile of one site on addr whose mcp_tasks block
// has the storage lines given.
func storeFailConfig(adminAddr, addr, upstream, storage string) string {
	return globalHead(adminAddr, "\tgrace_period 5s") + fmt.Sprintf(`
http://:%s {
	bind 127.0.0.1
	mcp_tasks /mcp* {
%s
	}
	reverse_proxy /mcp* %s
}
`, addr[strings.LastIndexByte(addr, ':')+1:], indent(storage, "\t\t"), upstream)
}

// storeFailCase is a storage configuration that can never work.
type storeFailCase struct {
	name string
	// storage returns the storage lines of the mcp_tasks block, and a
	// secret that must never show (or "").
	storage func(t *testing.T) (lines, secret string)
	// want are parts of the error: what is wrong and what to do.
	want []string
}

func TestStoreFailsEarly(t *testing.T) {
	t.Parallel()
	dsn, db := testDatabase(t)
	_, upAddr := testUpstream(t)
	file := filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []storeFailCase{
		{"storage_dir under a file", func(*testing.T) (string, string) {
			return "storage_dir " + filepath.Join(file, "store"), ""
		}, []string{file, "not a directory", "point the storage directory at a directory"}},
		{"storage_dir on a read-only filesystem", func(t *testing.T) (string, string) {
			return "storage_dir " + filepath.Join(mountFS(t, "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs"), "store"), ""
		}, []string{"read-only file system", "writable filesystem"}},
		{"a database that does not exist", func(t *testing.T) (string, string) {
			return "storage postgres " + withDatabase(t, dsn, "no_such_db_e2e"), ""
		}, []string{`database "no_such_db_e2e"`, "3D000", "create the database"}},
		{"a role the server refuses", func(t *testing.T) (string, string) {
			return "storage postgres " + withDSNParam(t, dsn, "user", "no_such_role_e2e"), ""
		}, []string{`database "` + db.Config().Database + `"`, `user "no_such_role_e2e"`, "28000", "correct the user or password"}},
		{"a user that may not create the schema", func(t *testing.T) (string, string) {
			role := fmt.Sprintf("noschema_%d", os.Getpid())
			postgresServerExec(t, "CREATE ROLE "+role+" LOGIN")
			t.Cleanup(func() { postgresServerExec(t, "DROP ROLE IF EXISTS "+role) })
			return "storage postgres " + withDSNParam(t, dsn, "user", role), ""
		}, []string{`schema "mcp_tasks" does not exist and the user may not create it`, "AUTHORIZATION"}},
		{"a schema a newer gateway migrated", func(t *testing.T) (string, string) {
			if _, err := db.Exec(context.Background(), `CREATE SCHEMA IF NOT EXISTS newer_e2e;
				CREATE TABLE IF NOT EXISTS newer_e2e.schema_migrations (version integer PRIMARY KEY);
				INSERT INTO newer_e2e.schema_migrations VALUES (999) ON CONFLICT DO NOTHING`); err != nil {
				t.Fatal(err)
			}
			return "storage postgres {\n\tdsn " + dsn + "\n\tschema newer_e2e\n}", ""
		}, []string{`schema "newer_e2e" is at version 999`, "upgrade the gateway"}},
		{"a wrong password", func(t *testing.T) (string, string) {
			role := passwordRole(t)
			secret := "wrong-pw-5e1c"
			return "storage postgres " + withDSNParam(t, withDSNParam(t, dsn, "user", role), "password", secret), secret
		}, []string{`user "pw_role_e2e"`, "28P01", "correct the user or password"}},
	}

	// The running Caddy that the bad configurations are loaded into.
	good := startGateway(t, gatewayOptions{Upstream: upAddr, Directives: v2025Tools})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lines, secret := c.storage(t)
			check := func(what string, out []byte, err error) {
				t.Helper()
				if err == nil {
					t.Errorf("%s succeeded, want an error:\n%s", what, tail(string(out), 3000))
					return
				}
				// caddy reload shows the server's JSON answer, quotes escaped.
				plain := strings.NewReplacer(`\\\"`, `"`, `\"`, `"`).Replace(string(out))
				for _, w := range c.want {
					if !strings.Contains(plain, w) {
						t.Errorf("%s: the error does not say %q:\n%s", what, w, tail(string(out), 3000))
					}
				}
				if secret != "" && strings.Contains(string(out), secret) {
					t.Errorf("%s shows the password:\n%s", what, grepLines(string(out), secret))
				}
			}
			home := t.TempDir()
			env := append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"))
			config := filepath.Join(home, "Caddyfile")
			write := func(cfg string) {
				if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write(storeFailConfig(freeAddr(t), freeAddr(t), upAddr, lines))

			cmd := exec.Command(caddyBinary, "validate", "--config", config, "--adapter", "caddyfile")
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			check("caddy validate", out, err)

			// caddy run must end on its own, with the error; one that still
			// runs after the deadline serves 503s instead.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd = exec.CommandContext(ctx, caddyBinary, "run", "--config", config, "--adapter", "caddyfile")
			cmd.Env = env
			out, err = cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Errorf("caddy run was still running after a minute:\n%s", tail(string(out), 3000))
			} else {
				check("caddy run", out, err)
			}

			write(storeFailConfig(good.adminAddr, good.addr, upAddr, lines))
			cmd = exec.Command(caddyBinary, "reload", "--config", config, "--adapter", "caddyfile", "--address", good.adminAddr)
			cmd.Env = env
			out, err = cmd.CombinedOutput()
			check("caddy reload", out, err)
			forgetIdleConnections()
			// The running configuration stays, and serves.
			cl := newRPCClient(t, good.URL)
			cl.initialize("")
			task := cl.createTask("slow_compute", map[string]any{"seconds": 0.1, "label": "still-good"}, 600000)
			if m := cl.call("tasks/result", map[string]string{"taskId": task.TaskID}); m.Error != nil || !strings.Contains(string(m.Result), "still-good") {
				t.Errorf("after the failed reload, tasks/result = %s %+v", m.Result, m.Error)
			}
			if secret != "" && strings.Contains(good.logs(), secret) {
				t.Errorf("Caddy logged the password:\n%s", grepLines(good.logs(), secret))
			}
		})
	}
}

// passwordRole creates a role that must give its password (scram) on the
// test's own cluster, whose other connections the server trusts, and
// returns its name; the test is skipped on the server of MCP_TASKS_TEST_DSN,
// whose authentication it must not change.
func passwordRole(t *testing.T) string {
	t.Helper()
	if os.Getenv(pgtest.EnvDSN) != "" {
		t.Skipf("changing pg_hba.conf needs the tests' own cluster, not the server of %s", pgtest.EnvDSN)
	}
	const role = "pw_role_e2e"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := testPostgres(t)
	admin, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	var hba string
	if err := admin.QueryRow(ctx, "SHOW hba_file").Scan(&hba); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(hba)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+role); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD 'right-pw-e2e'"); err != nil {
		t.Fatal(err)
	}
	lines := fmt.Sprintf("local all %[1]s scram-sha-256\nhost all %[1]s all scram-sha-256\n", role)
	if err := os.WriteFile(hba, append([]byte(lines), before...), 0o600); err != nil {
		t.Fatal(err)
	}
	reload := func() {
		if _, err := admin.Exec(context.Background(), "SELECT pg_reload_conf()"); err != nil {
			t.Error(err)
		}
	}
	reload()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = os.WriteFile(hba, before, 0o600)
		if conn, err := pgx.Connect(ctx, srv.DSN); err == nil {
			_, _ = conn.Exec(ctx, "SELECT pg_reload_conf()")
			_, _ = conn.Exec(ctx, "DROP ROLE IF EXISTS "+role)
			_ = conn.Close(ctx)
		}
	})
	wrong := withDSNParam(t, withDSNParam(t, srv.DSN, "user", role), "password", "not-it")
	waitFor(t, 30*time.Second, "the server to ask "+role+" for its password", func() bool {
		conn, err := pgx.Connect(ctx, wrong)
		if err == nil {
			_ = conn.Close(ctx)
			return false
		}
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "28P01"
	})
	return role
}

// A database that nobody serves when Caddy starts (connection refused) is
// a fault that passes: caddy validate accepts the configuration, Caddy
// starts with a warning, and once the database answers on that address the
// store opens and tasks work, without a reload.
func TestStoreTransientAtStart(t *testing.T) {
	t.Parallel()
	dsn, _ := testDatabase(t)
	_, upAddr := testUpstream(t)
	// The database's address: a TCP port nobody listens on yet, later a
	// forwarder to the server.
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	b := &pgBlackhole{network: "tcp", target: net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port))}
	if strings.HasPrefix(cfg.Host, "/") {
		b.network, b.target = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	later := withDSNParam(t, withDSNParam(t, dsn, "host", host), "port", port)
	if isURLDSN(dsn) {
		later = strings.Replace(dsn, "@"+cfg.Host+":"+fmt.Sprint(cfg.Port), "@"+addr, 1)
	}

	home := t.TempDir()
	config := filepath.Join(home, "Caddyfile")
	gwAddr, adminAddr := freeAddr(t), freeAddr(t)
	if err := os.WriteFile(config, []byte(storeFailConfig(adminAddr, gwAddr, upAddr, "storage postgres {env.MCP_TASKS_DSN}\n"+v2025Tools)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"HOME=" + home, "XDG_DATA_HOME=" + filepath.Join(home, "data"), "XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "MCP_TASKS_DSN=" + later}
	cmd := exec.Command(caddyBinary, "validate", "--config", config, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Valid configuration") {
		t.Fatalf("caddy validate with the database down: %v\n%s", err, tail(string(out), 3000))
	}
	proc := startProcessEnv(t, env, gwAddr, caddyBinary, "run", "--config", config, "--adapter", "caddyfile")
	waitFor(t, 30*time.Second, "the warning that the database cannot be reached", func() bool {
		return strings.Contains(proc.Output(), "cannot be reached now; starting anyway")
	})
	if code, _ := adminDo(t, adminAddr, "GET", "/mcp_tasks/health", nil); code != http.StatusServiceUnavailable {
		t.Errorf("health with the database down = %d, want 503", code)
	}

	if b.ln, err = net.Listen("tcp", addr); err != nil {
		t.Fatalf("listening on the database's address: %v", err)
	}
	t.Cleanup(b.close)
	go b.serve()
	waitFor(t, 60*time.Second, "health once the database answers", func() bool {
		code, _ := adminDo(t, adminAddr, "GET", "/mcp_tasks/health", nil)
		return code == http.StatusOK
	})
	c := newRPCClient(t, "http://"+gwAddr+"/mcp")
	c.initialize("")
	task := c.createTask("slow_compute", map[string]any{"seconds": 0.1, "label": "came-up"}, 600000)
	if m := c.call("tasks/result", map[string]string{"taskId": task.TaskID}); m.Error != nil || !strings.Contains(string(m.Result), "came-up") {
		t.Errorf("tasks/result = %s %+v", m.Result, m.Error)
	}
}
