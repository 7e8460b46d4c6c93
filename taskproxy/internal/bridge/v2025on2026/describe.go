package v2025on2026

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A session's client description is what its initialize (and
// logging/setLevel) said of its client, which each of its requests
// carries upstream as 2026-07-28 _meta. It is stored with the session's
// binding (task.SessionDescriber), so that it is there for as long as the
// session, whatever the number of sessions, on every replica and after a
// restart. A binding stored without one (by an older build) reads as a
// client that declared nothing.

// description is a session's client description as stored.
type description struct {
	Capabilities json.RawMessage `json:"capabilities,omitempty"`
	ClientInfo   json.RawMessage `json:"clientInfo,omitempty"`
	LogLevel     string          `json:"logLevel,omitempty"`
}

func descriptionOf(meta translate.RequestMeta) description {
	return description{Capabilities: meta.Capabilities, ClientInfo: meta.ClientInfo, LogLevel: meta.LogLevel}
}

func (d description) requestMeta() translate.RequestMeta {
	return translate.RequestMeta{Capabilities: d.Capabilities, ClientInfo: d.ClientInfo, LogLevel: d.LogLevel}
}

// descriptions reads and writes sessions' descriptions in a store.
type descriptions struct{ store task.SessionDescriber }

// save stores meta as the description of sid, bound to owner.
func (d descriptions) save(ctx context.Context, sid, owner string, meta translate.RequestMeta) error {
	value, err := json.Marshal(descriptionOf(meta))
	if err != nil {
		return fmt.Errorf("encoding a session's client description: %w", err)
	}
	if err := d.store.DescribeSession(ctx, sid, owner, value); err != nil {
		return fmt.Errorf("storing a session's client description: %w", err)
	}
	return nil
}

// load returns the description of sid, bound to owner: none for a
// binding stored without one.
func (d descriptions) load(ctx context.Context, sid, owner string) (translate.RequestMeta, error) {
	value, err := d.store.SessionDescription(ctx, sid, owner)
	if err != nil {
		return translate.RequestMeta{}, fmt.Errorf("reading a session's client description: %w", err)
	}
	var desc description
	if len(value) > 0 {
		if err := json.Unmarshal(value, &desc); err != nil {
			return translate.RequestMeta{}, fmt.Errorf("decoding a session's client description: %w", err)
		}
	}
	return desc.requestMeta(), nil
}

// descriptions are the sessions' descriptions in the runtime's store.
func (c *call) descriptions() descriptions { return descriptions{store: c.Runtime.Store} }

// requestMeta returns what the request's session said of its client
// (nothing for a request without a session). When it cannot be read, the
// request is answered: 404 for a session that ended since the guard
// checked it, 503 or 500 for a store failure; ok is then false.
func (c *call) requestMeta() (meta translate.RequestMeta, ok bool) {
	if c.sid == "" {
		return translate.RequestMeta{}, true
	}
	meta, err := c.descriptions().load(c.R.Context(), c.sid, c.Owner)
	if err != nil {
		c.failDescription(err)
		return translate.RequestMeta{}, false
	}
	return meta, true
}

// failDescription answers a request whose session's description could not
// be read or written.
func (c *call) failDescription(err error) {
	if errors.Is(err, task.ErrNotFound) {
		wire.WriteError(c.W, http.StatusNotFound, c.Msg.ID, jsonrpc.Errorf(jsonrpc.CodeSessionNotFound, "Session not found"))
		return
	}
	e := rpcerr.InternalError(c.Log, "keeping a session's client description", err)
	wire.WriteError(c.W, wire.AnswerStatus(c.W, http.StatusInternalServerError, e), c.Msg.ID, e)
}
