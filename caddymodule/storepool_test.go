package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	zapobserver "go.uber.org/zap/zaptest/observer"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The stores of a configuration that stops share one grace period, counted
// from its stopping event, since Caddy closes them one after the other.
// A process that exits drains for the longest drain of its handlers
// instead; a reload keeps the short grace.
func TestGraceLeft(t *testing.T) {
	defer stoppingSince.Store(stoppingSince.Load())
	defer drainFor.Store(drainFor.Load())
	now := time.Now()
	tests := []struct {
		name     string
		stopping time.Time // zero: no stopping event yet
		drain    time.Duration
		want     time.Duration
	}{
		{"no stopping event", time.Time{}, 0, shutdownGrace},
		{"stopping now", now, 0, shutdownGrace},
		{"stopping 2s ago", now.Add(-2 * time.Second), 0, shutdownGrace - 2*time.Second},
		{"grace used up", now.Add(-10 * time.Second), 0, 0},
		{"clock stepped back", now.Add(time.Minute), 0, shutdownGrace},
		{"exiting, drain 30s, stopping 2s ago", now.Add(-2 * time.Second), 30 * time.Second, 28 * time.Second},
		{"exiting, drain 30s used up", now.Add(-31 * time.Second), 30 * time.Second, 0},
		{"exiting, drain shorter than the default grace", now.Add(-time.Second), 2 * time.Second, time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stoppingSince.Store(0)
			drainFor.Store(int64(tt.drain))
			if !tt.stopping.IsZero() {
				stoppingSince.Store(tt.stopping.UnixNano())
			}
			if got := graceLeft(now); got != tt.want {
				t.Errorf("graceLeft = %s, want %s", got, tt.want)
			}
		})
	}
}

// Each handler of an exiting configuration records its drain; the longest
// counts. A reload's stopping event records none.
func TestMarkStopping(t *testing.T) {
	defer stoppingSince.Store(stoppingSince.Load())
	defer drainFor.Store(drainFor.Load())
	drainFor.Store(0)
	markStopping(false, time.Hour)
	if got := drainFor.Load(); got != 0 {
		t.Fatalf("a reload recorded a drain of %s", time.Duration(got))
	}
	for _, d := range []time.Duration{10 * time.Second, 30 * time.Second, 20 * time.Second} {
		markStopping(true, d)
	}
	if got := time.Duration(drainFor.Load()); got != 30*time.Second {
		t.Errorf("drain = %s, want the longest, 30s", got)
	}
}

// A reload's stopping event (the process does not exit) ends streams but
// leaves the shared runtime taking tasks: the new configuration serves on.
func TestReloadDoesNotDrain(t *testing.T) {
	defer stoppingSince.Store(stoppingSince.Load())
	defer drainFor.Store(drainFor.Load())
	drainFor.Store(0)
	h := &Handler{drain: 30 * time.Second, rt: taskproxy.NewLazyRuntime(func() (task.Store, error) { return nil, errors.New("never opened") })}
	h.stopping = make(chan struct{})
	h.stop = sync.OnceFunc(func() { close(h.stopping) })
	if err := (stoppingHandler{h}).Handle(context.Background(), caddy.Event{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.stopping:
	default:
		t.Error("the stopping event left the configuration's streams open")
	}
	if h.rt.Drain.Draining() || drainFor.Load() != 0 {
		t.Errorf("a reload drains the runtime (%v) or records a drain (%s)", h.rt.Drain.Draining(), time.Duration(drainFor.Load()))
	}
}

// A configuration that shares a store already in use but names other
// open-time settings gets the store as it is, and a warning naming the
// settings in force and those configured; the same settings, in another
// spelling, warn of nothing.
func TestAcquireRuntimeWarnsOfSettingsInForce(t *testing.T) {
	t.Parallel()
	off, on := false, true
	dir := t.TempDir()
	pg := func(maxConns int32) *PostgresStorage {
		p := &PostgresStorage{DSN: "postgres://gw@db.invalid/settings", MaxConns: maxConns}
		if err := p.Provision(caddy.Context{}); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name          string
		first, second StorageBackend
		want          string // the warning's fields, "" for none
	}{
		{"badger, same settings", &BadgerStorage{Dir: dir + "/a"}, &BadgerStorage{Dir: dir + "/a", SyncWrites: &on, MinFree: 64 << 20}, ""},
		{"badger, sync_writes off", &BadgerStorage{Dir: dir + "/b"}, &BadgerStorage{Dir: dir + "/b", SyncWrites: &off},
			"sync_writes on, min_free 64MiB -> sync_writes off, min_free 64MiB"},
		{"badger, min_free off", &BadgerStorage{Dir: dir + "/c", MinFree: 256 << 20}, &BadgerStorage{Dir: dir + "/c", MinFree: -1},
			"sync_writes on, min_free 256MiB -> sync_writes on, min_free off"},
		{"postgres, max_conns", pg(0), pg(16), "max_conns default -> max_conns 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core, logs := zapobserver.New(zap.WarnLevel)
			for _, b := range []StorageBackend{tt.first, tt.second} {
				_, key, err := acquireRuntime(b, zap.New(core))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _, _ = runtimes.Delete(key) })
			}
			got := ""
			for _, e := range logs.All() {
				f := e.ContextMap()
				got = fmt.Sprintf("%v -> %v", f["in_force"], f["configured"])
			}
			if got != tt.want {
				t.Errorf("warning %q, want %q", got, tt.want)
			}
		})
	}
}
