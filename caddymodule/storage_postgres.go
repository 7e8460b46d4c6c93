package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func init() {
	caddy.RegisterModule(PostgresStorage{})
}

// postgresOpenTimeout bounds connecting and migrating when a configuration
// starts; a store that cannot open is tried again at the next request or
// health probe.
const postgresOpenTimeout = 10 * time.Second

// postgresCheckTimeout bounds the connection Validate makes to tell a
// configuration that can never work from a database that is down.
const postgresCheckTimeout = 5 * time.Second

// PostgresStorage is the task store on PostgreSQL: every Caddy that names
// the same database and schema sees the same tasks, so several replicas can
// serve one set of tasks. The gateway creates the schema and its tables at
// start, and migrates them when a newer gateway starts (replicas that start
// together wait for each other).
type PostgresStorage struct {
	// DSN is the connection string: a URL
	// (postgres://user:password@host:5432/db?sslmode=verify-full) or
	// key=value pairs, as libpq reads them; PG* environment variables and
	// ~/.pgpass fill in what it leaves out. Placeholders such as
	// {env.MCP_TASKS_DSN} are resolved at provision, so the password need
	// not be in the configuration. The user needs to create a schema (or
	// to own Schema) in the database. Required. The password never appears
	// in logs, errors or the admin API.
	DSN string `json:"dsn,omitempty"`

	// Schema holds the store's tables; it is created if missing.
	// Gateways share tasks when they use the same database and schema.
	// Default: "mcp_tasks".
	Schema string `json:"schema,omitempty"`

	// MaxConns caps this Caddy's connections to the database. It applies
	// when the store is first opened (a reload does not resize the pool;
	// it logs a warning when it asks for another size).
	// Default: 0, pgx's default (the greater of 4 and the number of CPUs).
	MaxConns int32 `json:"max_conns,omitempty"`

	dsn    string // DSN with its placeholders resolved
	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (PostgresStorage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  storageNamespace + ".postgres",
		New: func() caddy.Module { return new(PostgresStorage) },
	}
}

// Provision resolves the DSN's placeholders and applies defaults. It does
// not connect.
func (p *PostgresStorage) Provision(ctx caddy.Context) error {
	p.logger = ctx.Logger()
	p.dsn = strings.TrimSpace(caddy.NewReplacer().ReplaceKnown(p.DSN, ""))
	if p.Schema == "" {
		p.Schema = pgstore.DefaultSchema
	}
	return nil
}

// Validate checks the DSN's syntax and the limits, then connects once
// (for at most postgresCheckTimeout) and reads the server's version, the
// user's privileges on the schema and the schema's version, creating and
// locking nothing. What will not change by itself (a database that does
// not exist, credentials the server refuses, a user that may not create
// the schema, a schema a newer gateway migrated, a server older than 12)
// fails the configuration, so caddy run, reload and validate refuse it with
// the database named and what to do; a server that is down, starting or
// out of connection slots is only logged, and the store opens when it
// answers.
func (p *PostgresStorage) Validate() error {
	if p.dsn == "" {
		if p.DSN != "" {
			return fmt.Errorf("storage postgres: dsn %q is empty once its placeholders are resolved (environment variable not set?)", p.DSN)
		}
		return errors.New("storage postgres: dsn is required")
	}
	if _, err := pgxpool.ParseConfig(p.dsn); err != nil {
		// pgx's message shows the DSN with its password replaced.
		return fmt.Errorf("storage postgres: dsn: %w", err)
	}
	if p.MaxConns < 0 {
		return fmt.Errorf("storage postgres: max_conns: must not be negative, got %d", p.MaxConns)
	}
	ctx, cancel := context.WithTimeout(context.Background(), postgresCheckTimeout)
	defer cancel()
	err := pgstore.Check(ctx, p.dsn, p.Schema)
	if err == nil {
		return nil
	}
	if fix, permanent := pgstore.Permanent(err); permanent {
		return fmt.Errorf("storage postgres: %s: %w; %s", p.target(), err, fix)
	}
	if p.logger != nil {
		p.logger.Warn("the task store's database cannot be reached now; starting anyway, the store opens when it answers",
			zap.String("database", p.target()), zap.Error(err))
	}
	return nil
}

// target names the database the DSN connects to, without the password:
// database "tasks" on 10.0.0.5:5432 as user "gw".
func (p *PostgresStorage) target() string {
	cfg, err := pgxpool.ParseConfig(p.dsn)
	if err != nil {
		return redactDSN(p.dsn)
	}
	c := cfg.ConnConfig
	return fmt.Sprintf("database %q on %s as user %q", c.Database, net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port))), c.User)
}

// StoreID is a hash of the DSN (it may hold the password) with the schema.
func (p *PostgresStorage) StoreID() string {
	sum := sha256.Sum256([]byte(p.dsn))
	return "postgres:" + hex.EncodeToString(sum[:16]) + "/" + p.Schema
}

// StoreName is the schema and the DSN with its password masked:
// postgres:<schema>@<dsn>.
func (p *PostgresStorage) StoreName() string {
	return "postgres:" + p.Schema + "@" + redactDSN(p.dsn)
}

// OpenSettings names max_conns, which sizes the pool when it opens.
func (p *PostgresStorage) OpenSettings() string {
	if p.MaxConns <= 0 {
		return "max_conns default"
	}
	return "max_conns " + strconv.Itoa(int(p.MaxConns))
}

// Backend returns "postgres".
func (p *PostgresStorage) Backend() string { return "postgres" }

// OpenStore connects, and creates or migrates the schema.
func (p *PostgresStorage) OpenStore(logger *zap.Logger) (task.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), postgresOpenTimeout)
	defer cancel()
	s, err := pgstore.Open(ctx, pgstore.Options{DSN: p.dsn, Schema: p.Schema, MaxConns: p.MaxConns, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("opening task store %s: %w", p.StoreName(), err)
	}
	return s, nil
}

// kvPassword matches the password of a key=value DSN, quoted or not.
var kvPassword = regexp.MustCompile(`(?i)\b((?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// redactDSN masks the passwords of a DSN, in either form.
func redactDSN(dsn string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "(unparsable DSN)"
		}
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, "xxxxx")
			}
		}
		u.RawQuery = q.Encode()
		return u.String()
	}
	return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

// UnmarshalCaddyfile reads the backend's block. Syntax:
//
//	storage postgres [<dsn>] {
//		dsn       <connection string>
//		schema    <name>
//		max_conns <n>
//	}
//
// A key=value DSN may be written as several arguments or quoted as one.
func (p *PostgresStorage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the backend's name
	if args := d.RemainingArgs(); len(args) > 0 {
		p.DSN = strings.Join(args, " ")
	}
	for d.NextBlock(0) {
		switch name := d.Val(); name {
		case "dsn":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			p.DSN = strings.Join(args, " ")
		case "schema":
			if !d.AllArgs(&p.Schema) {
				return d.ArgErr()
			}
		case "max_conns":
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n <= 0 {
				return d.Errf("max_conns: want a positive number of connections, got %q", v)
			}
			p.MaxConns = int32(n)
		default:
			return d.Errf("unrecognized storage postgres option %q", name)
		}
	}
	return nil
}

// Interface guards
var (
	_ storageBackendModule  = (*PostgresStorage)(nil)
	_ caddy.Provisioner     = (*PostgresStorage)(nil)
	_ caddy.Validator       = (*PostgresStorage)(nil)
	_ caddyfile.Unmarshaler = (*PostgresStorage)(nil)
)
