package task

import (
	"context"
)

// Caller identifies who sent a request. Owner is the opaque key tasks and
// sessions are bound to (trust domain, tenant and principal, as the glue
// derives them); Principal and Tenant are for the audit log only.
type Caller struct {
	Owner     string
	Principal string
	Tenant    string
}

type callerCtxKey struct{}

// Anonymous is the owner of every request that carries no caller.
const Anonymous = "anonymous"

// WithCaller returns ctx carrying the caller of its request. Tasks are
// bound to c.Owner.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerCtxKey{}, c)
}

// CallerOf returns the caller of ctx: the anonymous principal when none was
// set.
func CallerOf(ctx context.Context) Caller {
	if c, ok := ctx.Value(callerCtxKey{}).(Caller); ok && c.Owner != "" {
		return c
	}
	return Caller{Owner: Anonymous, Principal: Anonymous}
}

type rerunCtxKey struct{}

// IsRerun reports whether ctx belongs to a re-run after a restart: work the
// gateway starts from a request that another caller sent, whose connection
// and authentication state must not carry over (see the gateway's Config.Detach).
func IsRerun(ctx context.Context) bool {
	v, _ := ctx.Value(rerunCtxKey{}).(bool)
	return v
}

// RerunContext marks ctx as a re-run on behalf of c (see IsRerun).
func RerunContext(ctx context.Context, c Caller) context.Context {
	return context.WithValue(context.WithValue(ctx, callerCtxKey{}, c), rerunCtxKey{}, true)
}
