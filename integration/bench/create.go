package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// benchCreate measures durable task creation end to end over HTTP, with 64
// concurrent clients and sync_writes on, against the raw limit of the same
// disk: one Badger transaction with SyncWrites per record of the same size,
// from as many goroutines.
func benchCreate(cfg config) ([]row, error) {
	const clients = 64
	_, p, url, stop, err := gatewayUnderTest(cfg, "create-store", "sync_writes on\nmax_active_per_principal -1\nrate_limit -1")
	if err != nil {
		return nil, err
	}
	defer stop()
	c := newClient(clients)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{"a":"benchmark"},"task":{"ttl":600000}}}`)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	create := func(int, int) error {
		_, err := postCreate(c, url, body, headers)
		return err
	}
	closedLoop(clients, time.Second, create) // warm up
	profiled := p.profile(cfg.profiles, "create", cfg.duration)
	e2e := closedLoop(clients, cfg.duration, create)
	<-profiled
	if e2e.errs > 0 {
		return nil, fmt.Errorf("%d failed creates", e2e.errs)
	}

	raw, err := rawBadgerCreates(filepath.Join(cfg.work, "raw-store"), clients, cfg.duration)
	if err != nil {
		return nil, err
	}
	ratio := e2e.rate() / raw.rate()
	return []row{
		{measure: "durable create (64 clients, sync_writes on): tasks/s end to end vs raw Badger (one SyncWrites txn per record, same record size, 64 goroutines)",
			result: fmt.Sprintf("%.0f vs %.0f (%.2f×)", e2e.rate(), raw.rate(), ratio), target: "≥ 1.5× raw", met: ratio >= 1.5},
		{measure: "durable create: CreateTaskResult p50 / p99",
			result: fmt.Sprintf("%s / %s", ms(e2e.pct(0.5)), ms(e2e.pct(0.99))), target: "report", informational: true},
	}, nil
}

// rawBadgerCreates is the raw limit: records of the size the gateway writes,
// one Badger transaction with SyncWrites each, from clients goroutines, on
// Badger's default options.
func rawBadgerCreates(dir string, clients int, d time.Duration) (result, error) {
	db, err := badger.Open(badger.DefaultOptions(dir).WithSyncWrites(true).WithLogger(nil))
	if err != nil {
		return result{}, err
	}
	defer db.Close()
	r := closedLoop(clients, d, func(int, int) error {
		t := sampleTask("raw")
		data, err := json.Marshal(t)
		if err != nil {
			return err
		}
		return db.Update(func(txn *badger.Txn) error {
			for _, k := range []string{"t/" + t.ID, "o/" + t.ID, "a/" + t.ID, "e/" + t.ID} {
				var v []byte
				if k[0] == 't' {
					v = data
				}
				if err := txn.Set([]byte(k), v); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if r.errs > 0 {
		return r, fmt.Errorf("%d raw creates failed", r.errs)
	}
	return r, nil
}

// sampleTask is a record of the size the gateway writes for the create
// benchmark's call.
func sampleTask(holder string) *task.Task {
	now := time.Now().UTC()
	id := task.NewTaskID()
	return &task.Task{
		ID: id, Owner: task.Anonymous, Principal: task.Anonymous, Status: task.StatusWorking,
		CreatedAt: now, UpdatedAt: now, TTL: 10 * time.Minute, PollInterval: time.Second, Era: task.Era2025,
		Tool: "fast", Params: json.RawMessage(`{"name":"fast","arguments":{"a":"benchmark"}}`),
		UpstreamID: json.RawMessage(`"mcp-tasks:` + id + `:call:1"`), Round: 1,
		Lease:    task.Lease{Holder: holder, Expires: now.Add(30 * time.Second)},
		Endpoint: "/mcp", Host: "127.0.0.1:8080", Headers: map[string]string{"Mcp-Protocol-Version": "2025-11-25"},
	}
}
