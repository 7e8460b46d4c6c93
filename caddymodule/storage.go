package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// storageNamespace is the Caddy module namespace of task store backends:
// http.handlers.mcp_tasks.storage.badger, ….postgres, and any a plugin
// adds, the way Mercure plugs its transports.
const storageNamespace = "http.handlers.mcp_tasks.storage"

// StorageBackend is a module of the http.handlers.mcp_tasks.storage
// namespace: a task store the handler can use. Configurations whose
// backends report the same StoreID share one store, one runtime and one
// set of connections, across reloads (caddy.UsagePool).
type StorageBackend interface {
	// StoreID identifies the store for sharing: equal ids are the same
	// store. It may hold secrets (it is never shown): the admin API and
	// logs use StoreName.
	StoreID() string
	// StoreName names the store to operators (admin API, logs), without
	// secrets.
	StoreName() string
	// Backend is the backend's name: "badger", "postgres".
	Backend() string
	// OpenStore opens the store. It is called once per StoreID, when a
	// configuration using the store starts serving, not at Provision:
	// caddy validate and a reload that fails must open nothing.
	OpenStore(logger *zap.Logger) (task.Store, error)
}

// storeSettings is implemented by backends whose store takes options only
// when it opens (Badger's sync_writes and min_free, PostgreSQL's
// max_conns). Configurations sharing a store (a reload, two routes naming
// the same directory) share the store as the first one opened it, so a
// configuration asking for other settings is told that they wait for a
// restart instead of being silently ignored.
type storeSettings interface {
	// OpenSettings describes the options the store opens with, as the
	// Caddyfile writes them: "sync_writes on, min_free 64MiB".
	OpenSettings() string
}

// storageBackendModule is what a module of the namespace must implement.
type storageBackendModule interface {
	caddy.Module
	StorageBackend
}

// storageFromCaddyfile reads "storage <backend> { … }" into the raw JSON of
// the backend's module, with the backend's name under the inline key.
func storageFromCaddyfile(d *caddyfile.Dispenser) (json.RawMessage, error) {
	var backend string
	if !d.Args(&backend) {
		return nil, d.ArgErr()
	}
	mod, err := caddyfile.UnmarshalModule(d, storageNamespace+"."+backend)
	if err != nil {
		return nil, err
	}
	if _, ok := mod.(StorageBackend); !ok {
		return nil, d.Errf("storage: module %s is not a task store backend", backend)
	}
	return caddyconfig.JSONModuleObject(mod, "backend", backend, nil), nil
}

// loadStorage returns the handler's store backend, provisioned: the storage
// module, or Badger in storage_dir (the shorthand, and the default).
func (h *Handler) loadStorage(ctx caddy.Context) (StorageBackend, error) {
	if h.StorageRaw == nil {
		b := &BadgerStorage{Dir: h.StorageDir, SyncWrites: h.SyncWrites}
		if err := b.Provision(ctx); err != nil {
			return nil, err
		}
		if err := b.Validate(); err != nil {
			return nil, err
		}
		h.StorageDir = b.Dir
		return b, nil
	}
	switch {
	case h.StorageDir != "":
		return nil, errors.New("storage_dir and storage exclude each other: storage_dir is shorthand for storage badger { dir … }")
	case h.SyncWrites != nil:
		return nil, errors.New("sync_writes and storage exclude each other: sync_writes is an option of storage badger")
	}
	mod, err := ctx.LoadModule(h, "StorageRaw")
	if err != nil {
		return nil, fmt.Errorf("loading the storage backend: %w", err)
	}
	backend, ok := mod.(StorageBackend)
	if !ok {
		return nil, fmt.Errorf("storage: module %T is not a task store backend", mod)
	}
	return backend, nil
}
