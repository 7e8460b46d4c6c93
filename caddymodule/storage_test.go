package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The storage subdirective: errors of the Caddyfile.
func TestStorageCaddyfileErrors(t *testing.T) {
	tests := []struct{ name, input, wantErr string }{
		{"storage_dir and storage", "mcp_tasks {\n storage_dir /tmp/x\n storage badger {\n  dir /tmp/y\n }\n}", "storage_dir and storage exclude each other"},
		{"storage and storage_dir", "mcp_tasks {\n storage postgres {\n  dsn postgres://db/tasks\n }\n storage_dir /tmp/x\n}", "storage_dir and storage exclude each other"},
		{"sync_writes and storage", "mcp_tasks {\n sync_writes off\n storage postgres postgres://db/tasks\n}", "sync_writes and storage exclude each other"},
		{"unknown backend", "mcp_tasks {\n storage redis {\n  addr localhost\n }\n}", "http.handlers.mcp_tasks.storage.redis"},
		{"no backend", "mcp_tasks {\n storage\n}", "wrong argument count"},
		{"storage twice", "mcp_tasks {\n storage badger\n storage badger\n}", "storage is configured twice"},
		{"unknown postgres option", "mcp_tasks {\n storage postgres {\n  pool 3\n }\n}", "unrecognized storage postgres option"},
		{"bad max_conns", "mcp_tasks {\n storage postgres {\n  max_conns lots\n }\n}", "max_conns: want a positive number"},
		{"zero max_conns", "mcp_tasks {\n storage postgres {\n  max_conns 0\n }\n}", "max_conns: want a positive number"},
		{"dsn without value", "mcp_tasks {\n storage postgres {\n  dsn\n }\n}", "wrong argument count"},
		{"unknown badger option", "mcp_tasks {\n storage badger {\n  compression zstd\n }\n}", "unrecognized storage badger option"},
		{"bad badger sync_writes", "mcp_tasks {\n storage badger {\n  sync_writes maybe\n }\n}", "sync_writes"},
		{"bad badger min_free", "mcp_tasks {\n storage badger {\n  min_free lots\n }\n}", "min_free: want a size"},
		{"badger min_free without value", "mcp_tasks {\n storage badger {\n  min_free\n }\n}", "wrong argument count"},
	}
	checkCaddyfileErrors(t, tests)
}

// A JSON configuration with a storage module provisions and validates
// without opening anything: no directory is made, no database is
// connected to (the DSN names a server that does not exist).
func TestStorageJSONValidates(t *testing.T) {
	t.Setenv("MCP_TASKS_TEST_STORAGE_DSN", "postgres://gw:s3cret@127.0.0.1:1/tasks")
	pg := func(fields map[string]any) map[string]any {
		m := map[string]any{"backend": "postgres"}
		maps.Copy(m, fields)
		return m
	}
	tests := []struct {
		name    string
		storage map[string]any
		extra   map[string]any
		wantErr string
	}{
		{"postgres", pg(map[string]any{"dsn": "{env.MCP_TASKS_TEST_STORAGE_DSN}", "max_conns": 4}), nil, ""},
		{"postgres key=value", pg(map[string]any{"dsn": "host=/run/postgresql dbname=tasks", "schema": "gw"}), nil, ""},
		{"badger", map[string]any{"backend": "badger", "dir": "DIR", "sync_writes": false}, nil, ""},
		{"storage and storage_dir", map[string]any{"backend": "badger"}, map[string]any{"storage_dir": "DIR"}, "storage_dir and storage exclude each other"},
		{"storage and sync_writes", pg(map[string]any{"dsn": "postgres://db/tasks"}), map[string]any{"sync_writes": true}, "sync_writes and storage exclude each other"},
		{"unknown backend", map[string]any{"backend": "redis"}, nil, "http.handlers.mcp_tasks.storage.redis"},
		{"no dsn", pg(nil), nil, "dsn is required"},
		{"dsn of an unset variable", pg(map[string]any{"dsn": "{env.MCP_TASKS_NOT_SET_ANYWHERE}"}), nil, "empty once its placeholders are resolved"},
		{"bad dsn", pg(map[string]any{"dsn": "postgres://gw:s3cret@db:notaport/tasks"}), nil, "storage postgres: dsn"},
		{"negative max_conns", pg(map[string]any{"dsn": "postgres://db/tasks", "max_conns": -1}), nil, "max_conns"},
		{"unknown postgres field", pg(map[string]any{"dsn": "postgres://db/tasks", "pool": 1}), nil, "unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tasks")
			extra := map[string]any{"storage_dir": "", "storage": tt.storage}
			for k, v := range tt.extra {
				if v == "DIR" {
					v = dir
				}
				extra[k] = v
			}
			if tt.storage["dir"] == "DIR" {
				tt.storage["dir"] = dir
			}
			err := caddy.Validate(jsonConfig(t, dir, extra))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("validate: got %v, want an error containing %q", err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Errorf("the error shows the DSN's password: %v", err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("validating created or opened the store directory %s (stat: %v)", dir, err)
			}
		})
	}
}

// Store identities: the same store is one pool entry whatever the
// spelling of its directory; a PostgreSQL store is its DSN and schema; the
// names operators see never show a password.
func TestStorageIdentity(t *testing.T) {
	rel := &BadgerStorage{Dir: "data/../data"}
	abs := &BadgerStorage{}
	wd, _ := os.Getwd()
	abs.Dir = filepath.Join(wd, "data")
	for _, b := range []*BadgerStorage{rel, abs} {
		if err := b.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
	}
	if rel.StoreID() != abs.StoreID() || rel.StoreID() != "badger:"+abs.Dir || rel.StoreName() != abs.Dir {
		t.Errorf("badger ids %q %q, name %q: want badger:%s and the directory", rel.StoreID(), abs.StoreID(), rel.StoreName(), abs.Dir)
	}

	t.Setenv("MCP_TASKS_TEST_STORAGE_DSN", "postgres://gw:s3cret@db:5432/tasks?sslmode=require")
	pg := func(dsn, schema string) *PostgresStorage {
		p := &PostgresStorage{DSN: dsn, Schema: schema}
		if err := p.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	viaEnv := pg("{env.MCP_TASKS_TEST_STORAGE_DSN}", "")
	literal := pg("postgres://gw:s3cret@db:5432/tasks?sslmode=require", "mcp_tasks")
	other := pg("postgres://gw:s3cret@db:5432/tasks?sslmode=require", "other")
	if viaEnv.StoreID() != literal.StoreID() || viaEnv.StoreID() == other.StoreID() {
		t.Errorf("postgres ids %q %q %q: want the first two equal, the third apart", viaEnv.StoreID(), literal.StoreID(), other.StoreID())
	}
	if want := "postgres:mcp_tasks@postgres://gw:xxxxx@db:5432/tasks?sslmode=require"; viaEnv.StoreName() != want {
		t.Errorf("name %q, want %q", viaEnv.StoreName(), want)
	}

	for dsn, want := range map[string]string{
		"postgres://gw:s3cret@db/tasks":                 "postgres://gw:xxxxx@db/tasks",
		"postgresql://db/tasks?password=s3cret&user=gw": "postgresql://db/tasks?password=xxxxx&user=gw",
		"host=db user=gw password=s3cret dbname=tasks":  "host=db user=gw password=xxxxx dbname=tasks",
		"host=db password = 's3 cret' dbname=tasks":     "host=db password = xxxxx dbname=tasks",
		"host=db PASSWORD=s3cret sslpassword=s3cret":    "host=db PASSWORD=xxxxx sslpassword=xxxxx",
		"host=/run/postgresql dbname=tasks":             "host=/run/postgresql dbname=tasks",
	} {
		got := redactDSN(dsn)
		if got != want || strings.Contains(got, "s3") {
			t.Errorf("redactDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// Configurations whose backends name the same store get one runtime from
// the usage pool (so one Badger directory lock, one connection pool), and
// the admin API sees it once, under its redacted name.
func TestStoragePoolSharesByIdentity(t *testing.T) {
	pg := func(schema string) *PostgresStorage {
		p := &PostgresStorage{DSN: "postgres://gw:s3cret@db.invalid/tasks", Schema: schema}
		if err := p.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var rts []*taskproxy.Runtime
	for _, b := range []StorageBackend{pg(""), pg("mcp_tasks"), pg("other")} {
		rt, key, err := acquireRuntime(b, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = runtimes.Delete(key) })
		rts = append(rts, rt)
	}
	if rts[0] != rts[1] || rts[0] == rts[2] {
		t.Errorf("runtimes %p %p %p: want the first two shared, the third apart", rts[0], rts[1], rts[2])
	}
	var names []string
	for _, nr := range pooledRuntimes() {
		names = append(names, nr.backend+" "+nr.name)
	}
	want := "[postgres postgres:mcp_tasks@postgres://gw:xxxxx@db.invalid/tasks postgres postgres:other@postgres://gw:xxxxx@db.invalid/tasks]"
	if fmt.Sprint(names) != want {
		t.Errorf("stores %v, want %s", names, want)
	}
}

// Through Caddy's Caddyfile adapter (as caddy adapt runs it), a storage
// given twice over or naming an unknown backend is an error with the line.
func TestStorageAdaptErrors(t *testing.T) {
	tests := []struct{ name, site, wantErr string }{
		{"storage_dir and storage", "storage_dir /var/lib/mcp\n\t\tstorage postgres {env.MCP_TASKS_DSN}", "storage_dir and storage exclude each other"},
		{"unknown backend", "storage etcd {\n\t\t\tendpoints localhost:2379\n\t\t}", "getting module named 'http.handlers.mcp_tasks.storage.etcd'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ":8080 {\n\tmcp_tasks {\n\t\t" + tt.site + "\n\t}\n\treverse_proxy localhost:3000\n}\n"
			_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(in), map[string]any{"filename": "Caddyfile"})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "Caddyfile:") {
				t.Errorf("adapt: %v, want an error with its line containing %q", err, tt.wantErr)
			}
		})
	}
}

// min_free sets the free space the Badger store keeps in reserve: a size,
// or off; with more reserve than the disk has, new tasks are refused as
// unavailable (HTTP 503 at the gateway), and with it off they are taken.
func TestBadgerMinFree(t *testing.T) {
	tests := []struct {
		name, block string
		want        int64
		refused     bool
	}{
		{"default", "", 0, false},
		{"a size", "min_free 256MiB", 256 << 20, false},
		{"off", "min_free off", -1, false},
		{"more than any disk", "min_free 1EiB", 1 << 60, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b BadgerStorage
			if err := b.UnmarshalCaddyfile(caddyfile.NewTestDispenser("badger {\n " + tt.block + "\n}")); err != nil {
				t.Fatal(err)
			}
			if b.MinFree != tt.want {
				t.Fatalf("MinFree = %d, want %d", b.MinFree, tt.want)
			}
			b.Dir = t.TempDir()
			store, err := b.OpenStore(zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			now := time.Now().UTC()
			tk := &task.Task{ID: task.NewTaskID(), Owner: "o", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Minute}
			err = store.Create(context.Background(), tk)
			if refused := errors.Is(err, task.ErrUnavailable); refused != tt.refused || (!tt.refused && err != nil) {
				t.Errorf("create: %v, want refused %v", err, tt.refused)
			}
		})
	}
}
