// Package upstream is a real MCP server built on the official go-sdk. It is
// the demo upstream behind the Caddy MCP gateway and the server that the
// end-to-end tests run in-process.
//
// One HTTP endpoint serves both protocol eras: 2026-07-28 stateless requests
// go to a stateless go-sdk handler, everything else (initialize, session
// traffic, GET, DELETE, 2025-11-25) goes to a stateful one. Both handlers
// share one [mcp.Server], so the tools behave identically in either era.
package upstream

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StatelessProtocolVersion is the first MCP protocol version served by the
// stateless (sessionless) handler. Protocol versions are ISO dates, so plain
// string comparison orders them.
const StatelessProtocolVersion = "2026-07-28"

// metaKeyProtocolVersion is the per-request _meta key a 2026-07-28 client
// uses to announce its protocol version (SEP-2575).
const metaKeyProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// Options configures a [Server].
type Options struct {
	// Logger receives the server's and go-sdk's log output. Nil discards it.
	Logger *slog.Logger

	// StateKey signs the requestState handed out with input-required results.
	// Nil means a random per-process key; set it when several instances must
	// accept each other's states.
	StateKey []byte

	// EventStore keeps the events of each 2025-11-25 session's streams in
	// memory (go-sdk's MemoryEventStore), so that a client whose stream
	// broke resumes it with GET and Last-Event-ID: the server then writes
	// a priming event with an id first and an id on every event, and runs
	// a call on when its stream breaks. Off, a stream has no ids and a GET
	// with Last-Event-ID is refused (HTTP 400).
	EventStore bool
}

// Server is an MCP server with the demo tools. It implements [http.Handler]
// and records what its tools saw, for tests (see [Server.Calls]).
type Server struct {
	logger    *slog.Logger
	stateKey  []byte
	stateless http.Handler
	stateful  http.Handler
	obs       observer
}

// New returns a Server with all demo tools registered.
func New(opts Options) *Server {
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	key := opts.StateKey
	if len(key) == 0 {
		key = make([]byte, 32)
		rand.Read(key) // crypto/rand.Read never returns an error.
	}
	s := &Server{logger: logger, stateKey: key}
	s.obs.init()

	srv := mcp.NewServer(&mcp.Implementation{
		Name:    "caddy-mcp-tasks-demo-upstream",
		Version: "0.1.0",
	}, &mcp.ServerOptions{Logger: logger})
	s.addTools(srv)

	getServer := func(*http.Request) *mcp.Server { return srv }
	s.stateless = mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		Stateless: true,
		Logger:    logger,
		// On 2026-07-28 the POST is the whole request lifecycle: the gateway
		// cancels a call by closing the stream, so tools must see that as
		// context cancellation.
		PropagateRequestCancellation: true,
		// go-sdk refuses requests that arrive on a loopback address with a
		// non-loopback Host header (DNS-rebinding protection). A reverse
		// proxy such as Caddy forwards the client's Host (e.g.
		// "mcp.example.com") to 127.0.0.1:PORT, which would be refused; the
		// gateway in front is the trust boundary, not this server.
		DisableLocalhostProtection: true,
	})
	stateful := &mcp.StreamableHTTPOptions{
		Stateless:                  false,
		Logger:                     logger,
		DisableLocalhostProtection: true, // see above
	}
	if opts.EventStore {
		stateful.EventStore = mcp.NewMemoryEventStore(nil)
	}
	s.stateful = mcp.NewStreamableHTTPHandler(getServer, stateful)
	return s
}

// ServeHTTP routes a request to the stateless or the stateful go-sdk
// handler, depending on the protocol era it belongs to.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.isStateless(r) {
		s.logger.Debug("routing request", "handler", "stateless", "method", r.Method)
		s.stateless.ServeHTTP(w, r)
		return
	}
	s.logger.Debug("routing request", "handler", "stateful", "method", r.Method)
	s.stateful.ServeHTTP(w, r)
}

// isStateless reports whether r uses the 2026-07-28 stateless protocol:
// either its MCP-Protocol-Version header says so, or its JSON-RPC body
// carries the per-request protocolVersion in params._meta. It peeks at the
// body and restores r.Body so that the chosen handler reads it in full.
func (s *Server) isStateless(r *http.Request) bool {
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v >= StatelessProtocolVersion {
		return true
	}
	if r.Method != http.MethodPost || r.Body == nil {
		return false
	}
	// Read at most the limit go-sdk itself enforces (plus one byte): a larger
	// body cannot be parsed here, and go-sdk answers it with 413 anyway.
	peek, err := io.ReadAll(io.LimitReader(r.Body, mcp.DefaultMaxRequestBodyBytes+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(peek), r.Body), r.Body}
	if err != nil {
		// Let the handler that reads the rest report the broken body.
		return false
	}
	return hasProtocolVersionMeta(peek)
}

// hasProtocolVersionMeta reports whether a JSON-RPC message (or any message
// of a batch) has params._meta["io.modelcontextprotocol/protocolVersion"].
func hasProtocolVersionMeta(body []byte) bool {
	type message struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	var msgs []message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		if err := json.Unmarshal(trimmed, &msgs); err != nil {
			return false
		}
	} else {
		var m message
		if err := json.Unmarshal(trimmed, &m); err != nil {
			return false
		}
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		if _, ok := m.Params.Meta[metaKeyProtocolVersion]; ok {
			return true
		}
	}
	return false
}
