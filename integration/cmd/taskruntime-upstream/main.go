// Command taskruntime-upstream serves the 2026-07-28 task runtime fixture
// (package integration/upstream/taskruntime) over HTTP, so that tests can
// run it as a process of its own: kill it with SIGKILL and start it again
// on the same -state file, and it still knows its tasks (what survives is
// listed in the package documentation).
//
// Usage:
//
//	taskruntime-upstream [-addr 127.0.0.1:9200] [-path /mcp] [-control /control/]
//	    [-state FILE] [-ttl 10m] [-poll 100ms] [-bind Authorization] [-hold tool=step,…]
//	    [-accept-2025-initialize]
//
// -floats writes integers as integral floats (pollIntervalMs 5000.0) and
// -pickup delays the start of each task's work, as fastmcp-tasks on
// Docket does (see taskruntime.Options).
//
// -control mounts the observer API (see Server.ControlHandler) on the same
// listener; "" leaves it off. -hold installs holds at start, so that a
// restarted process holds new tasks as the previous one did.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// shutdownGrace bounds how long in-flight requests may delay exit after
// SIGTERM or SIGINT.
const shutdownGrace = 5 * time.Second

func main() {
	addr := flag.String("addr", "127.0.0.1:9200", "address to listen on")
	path := flag.String("path", "/mcp", "HTTP path of the MCP endpoint")
	control := flag.String("control", "/control/", `path prefix of the observer API ("" for none)`)
	state := flag.String("state", "", "file the tasks are kept in (none: memory only)")
	flag.BoolVar(&integralFloats, "floats", false, "write integers as integral floats (5000.0), as fastmcp-tasks does")
	flag.DurationVar(&pickupDelay, "pickup", 0, "delay before a new task's work starts (a queue worker's pickup)")
	ttl := flag.Duration("ttl", taskruntime.DefaultTTL, "ttlMs of every task (negative: unlimited)")
	poll := flag.Duration("poll", taskruntime.DefaultPollInterval, "pollIntervalMs of every task")
	bind := flag.String("bind", "Authorization", `request header tasks are bound to ("-": none)`)
	holds := flag.String("hold", "", "comma-separated tool=step holds for new tasks")
	accept2025 := flag.Bool("accept-2025-initialize", false, "answer a 2025-11-25 initialize (server/discover still lists only 2026-07-28)")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := taskruntime.Options{Logger: logger, StateFile: *state, TTL: *ttl, PollInterval: *poll, BindHeader: *bind, AcceptV2025Initialize: *accept2025}
	if err := run(ctx, logger, *addr, *path, *control, *holds, opts); err != nil {
		logger.Error("taskruntime-upstream failed", "error", err)
		os.Exit(1)
	}
}

// Set by -floats and -pickup.
var (
	integralFloats bool
	pickupDelay    time.Duration
)

func run(ctx context.Context, logger *slog.Logger, addr, path, control, holds string, opts taskruntime.Options) error {
	opts.IntegralFloats, opts.PickupDelay = integralFloats, pickupDelay
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("-path %q must start with /", path)
	}
	s, err := taskruntime.New(opts)
	if err != nil {
		return fmt.Errorf("starting the task runtime: %w", err)
	}
	defer s.Close()
	if holds != "" {
		for h := range strings.SplitSeq(holds, ",") {
			tool, step, ok := strings.Cut(h, "=")
			k, err := strconv.Atoi(step)
			if !ok || err != nil || k < 1 {
				return fmt.Errorf("-hold %q: want tool=step with step ≥ 1", h)
			}
			s.Hold(tool, k)
		}
	}
	mux := http.NewServeMux()
	mux.Handle(path, s)
	if control != "" {
		prefix := strings.TrimSuffix(control, "/")
		mux.Handle(prefix+"/", http.StripPrefix(prefix, s.ControlHandler()))
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP task runtime", "url", "http://"+ln.Addr().String()+path, "state", opts.StateFile)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		logger.Warn("graceful shutdown incomplete, closing connections", "error", err)
		if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("closing server: %w", err)
		}
	}
	return nil
}
