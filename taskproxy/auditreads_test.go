package taskproxy

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
)

// Polling a finished task from the view cache audits the owner's first
// read at info level and the repeats at debug level (nothing at all when
// debug is off); a second route on the same runtime (another site, or the
// next configuration) audits its own first read at info again.
func TestCachedReadsAudit(t *testing.T) {
	t.Parallel()
	for _, level := range []zapcore.Level{zapcore.InfoLevel, zapcore.DebugLevel} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(level)
			rt := NewRuntime(newMemStore(t))
			t.Cleanup(func() { _ = rt.Close(0) })
			gateway := func(route string) *Gateway {
				g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, Route: route, AuditLogger: zap.New(core)}, rt)
				mustStart(t, g)
				return g
			}
			first, second := gateway("a"), gateway("b")
			tk := storeFinished(t, first, "bob", runtime.Now(), time.Hour)
			reads := func(g *Gateway, n int) {
				for range n {
					getTask(t, g, "bob", runtime.WireV2025, tk.ID)
				}
			}
			count := func() (info, debug int) {
				for _, e := range logs.FilterMessage(runtime.AuditRetrieved).All() {
					switch e.Level {
					case zapcore.InfoLevel:
						info++
					case zapcore.DebugLevel:
						debug++
					}
				}
				return info, debug
			}
			reads(first, 4) // the first from the store, which fills the cache
			wantDebug := 0
			if level == zapcore.DebugLevel {
				wantDebug = 3
			}
			if info, debug := count(); info != 1 || debug != wantDebug {
				t.Errorf("4 reads through one route: %d info and %d debug lines, want 1 and %d", info, debug, wantDebug)
			}
			reads(second, 2)
			if level == zapcore.DebugLevel {
				wantDebug = 4
			}
			if info, debug := count(); info != 2 || debug != wantDebug {
				t.Errorf("then 2 reads through another route: %d info and %d debug lines, want 2 and %d", info, debug, wantDebug)
			}
			reads(first, 2)
			if level == zapcore.DebugLevel {
				wantDebug = 6
			}
			if info, debug := count(); info != 2 || debug != wantDebug {
				t.Errorf("then 2 more through the first route: %d info and %d debug lines, want 2 and %d", info, debug, wantDebug)
			}
		})
	}
}
