package caddymodule

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func init() {
	caddy.RegisterModule(BadgerStorage{})
}

// BadgerStorage is the embedded task store, a Badger database in a
// directory of this machine: the default, for one Caddy (no setup). The
// handler's storage_dir and sync_writes options are its shorthand.
type BadgerStorage struct {
	// Dir is the storage directory, created if missing. Configurations
	// that name the same directory share one store.
	// Default: Caddy's data directory + "/mcp_tasks".
	Dir string `json:"dir,omitempty"`

	// SyncWrites makes every task write wait for the disk (fsync), so an
	// accepted task survives a power loss, not only a crash of the
	// process. Concurrent writes share one fsync. Turning it off trades
	// that for speed: the last moments of writes before a power loss may
	// be lost. It applies when the directory is first opened: a reload
	// keeps the open store's setting (and logs a warning when it differs).
	// Default: true.
	SyncWrites *bool `json:"sync_writes,omitempty"`

	// MinFree is the free space, in bytes, of the directory's filesystem
	// below which the store refuses new tasks (HTTP 503 with Retry-After)
	// while it still records the outcomes of running ones: room kept for
	// Badger's own flushes and compaction, so that a full disk stops new
	// work instead of damaging the store. Negative turns the reserve off
	// (the store then only notices a filesystem that refuses writes). It
	// applies when the directory is first opened, as SyncWrites does.
	// Default: 64 MiB.
	MinFree int64 `json:"min_free,omitempty"`

	logger *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (BadgerStorage) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  storageNamespace + ".badger",
		New: func() caddy.Module { return new(BadgerStorage) },
	}
}

// Provision makes the directory absolute: it is the store's identity.
// Nothing is created or opened here.
func (b *BadgerStorage) Provision(ctx caddy.Context) error {
	b.logger = ctx.Logger()
	if b.Dir == "" {
		b.Dir = filepath.Join(caddy.AppDataDir(), "mcp_tasks")
	}
	dir, err := filepath.Abs(b.Dir)
	if err != nil {
		return fmt.Errorf("storage badger: resolving dir %q: %w", b.Dir, err)
	}
	b.Dir = dir
	return nil
}

// Validate checks the configuration after Provision, and that the
// directory can hold the store: it, or the nearest directory above it
// that exists, must be a directory Caddy can create files in (a file is
// created there and removed; the store is neither opened nor locked). What
// will not change by itself (a file in the way, no permission, a read-only
// filesystem) fails the configuration, so caddy run, reload and validate
// refuse it; anything else (a full disk, say) is only logged, and the store
// opens when it can.
func (b *BadgerStorage) Validate() error {
	if !filepath.IsAbs(b.Dir) {
		return fmt.Errorf("storage badger: dir %q is not absolute", b.Dir)
	}
	err := badgerstore.CheckDir(b.Dir)
	if err == nil {
		return nil
	}
	if fix, permanent := badgerstore.Permanent(err); permanent {
		return fmt.Errorf("storage badger: the task store directory %s cannot be used: %w; %s (storage_dir or storage badger dir)", b.Dir, err, fix)
	}
	if b.logger != nil {
		b.logger.Warn("the task store directory cannot be written now; starting anyway, the store opens when it can",
			zap.String("dir", b.Dir), zap.Error(err))
	}
	return nil
}

// StoreID is the absolute directory.
func (b *BadgerStorage) StoreID() string { return "badger:" + b.Dir }

// StoreName is the absolute directory, as the admin API always named
// Badger stores.
func (b *BadgerStorage) StoreName() string { return b.Dir }

// OpenSettings names sync_writes and min_free as the store opens with them.
func (b *BadgerStorage) OpenSettings() string {
	sync := "on"
	if b.SyncWrites != nil && !*b.SyncWrites {
		sync = "off"
	}
	minFree := b.MinFree
	if minFree == 0 {
		minFree = badgerstore.DefaultMinFreeBytes
	}
	return "sync_writes " + sync + ", min_free " + sizeSetting(minFree)
}

// sizeSetting writes a byte count as the Caddyfile may: whole MiB or KiB
// when it is one, "off" when negative.
func sizeSetting(n int64) string {
	switch {
	case n < 0:
		return "off"
	case n > 0 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + "MiB"
	case n > 0 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + "KiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// Backend returns "badger".
func (b *BadgerStorage) Backend() string { return "badger" }

// OpenStore creates the directory if needed and opens the database, which
// locks the directory against other processes.
func (b *BadgerStorage) OpenStore(logger *zap.Logger) (task.Store, error) {
	if err := os.MkdirAll(b.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating task store directory %s: %w", b.Dir, err)
	}
	store, err := badgerstore.Open(badgerstore.Options{Dir: b.Dir, SyncWrites: b.SyncWrites == nil || *b.SyncWrites, MinFreeBytes: b.MinFree, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("opening task store %s: %w", b.Dir, err)
	}
	return store, nil
}

// UnmarshalCaddyfile reads the backend's block. Syntax:
//
//	storage badger [<dir>] {
//		dir         <path>
//		sync_writes on|off
//		min_free    <size>|off
//	}
func (b *BadgerStorage) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the backend's name
	if d.NextArg() {
		b.Dir = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	for d.NextBlock(0) {
		switch name := d.Val(); name {
		case "dir":
			if !d.AllArgs(&b.Dir) {
				return d.ArgErr()
			}
		case "sync_writes":
			on, err := parseSyncWrites(d)
			if err != nil {
				return err
			}
			b.SyncWrites = on
		case "min_free":
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			if v == "off" {
				b.MinFree = -1
				continue
			}
			size, err := humanize.ParseBytes(v)
			if err != nil || size == 0 || size > math.MaxInt64 {
				return d.Errf("min_free: want a size such as 256MiB, or off, got %q", v)
			}
			b.MinFree = int64(size)
		default:
			return d.Errf("unrecognized storage badger option %q", name)
		}
	}
	return nil
}

// Interface guards
var (
	_ storageBackendModule  = (*BadgerStorage)(nil)
	_ caddy.Provisioner     = (*BadgerStorage)(nil)
	_ caddy.Validator       = (*BadgerStorage)(nil)
	_ caddyfile.Unmarshaler = (*BadgerStorage)(nil)
)
