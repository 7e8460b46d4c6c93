// Command demo-upstream serves the demo MCP upstream (package
// integration/upstream) over HTTP, for running behind the Caddy MCP gateway.
//
// Usage:
//
//	demo-upstream [-addr 127.0.0.1:9100] [-path /mcp] [-event-store]
//
// -event-store keeps each 2025-11-25 session's stream events in memory, so
// that a client whose stream broke resumes it with Last-Event-ID.
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
	"strings"
	"syscall"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// shutdownGrace bounds how long in-flight calls (and idle SSE streams, which
// never finish on their own) may delay exit after a signal.
const shutdownGrace = 5 * time.Second

func main() {
	addr := flag.String("addr", "127.0.0.1:9100", "address to listen on")
	path := flag.String("path", "/mcp", "HTTP path of the MCP endpoint")
	eventStore := flag.Bool("event-store", false, "keep 2025-11-25 stream events in memory, so that broken streams resume with Last-Event-ID")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, logger, *addr, *path, upstream.Options{Logger: logger, EventStore: *eventStore}); err != nil {
		logger.Error("demo-upstream failed", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, addr, path string, opts upstream.Options) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("-path %q must start with /", path)
	}
	mux := http.NewServeMux()
	mux.Handle(path, upstream.New(opts))

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving MCP", "url", "http://"+ln.Addr().String()+path)

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
		// Long-lived SSE streams keep Shutdown waiting; cut them off.
		logger.Warn("graceful shutdown incomplete, closing connections", "error", err)
		if err := srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("closing server: %w", err)
		}
	}
	return nil
}
