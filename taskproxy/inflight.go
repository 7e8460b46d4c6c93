package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
)

// The gateway keeps two tables (DESIGN.md, "Two tables, never one"): task
// routes live in the Store; this file holds the in-memory ones of this
// process.

// callKey names a client's in-flight request: the scope it was sent in (the
// session, or the owner when there is none) and its JSON-RPC id.
type callKey struct {
	scope string
	id    string
}

func newCallKey(scope string, id json.RawMessage) callKey {
	return callKey{scope: scope, id: string(bytes.TrimSpace(id))}
}

// plainCall is a client request that is not a task and is still in flight.
type plainCall struct {
	upstreamID json.RawMessage
	cancel     context.CancelFunc
}

// callTable is the request-cancellation table: plain calls in flight, so a
// client's notifications/cancelled reaches the upstream with the id the
// upstream knows. It never holds tasks.
type callTable struct {
	mu    sync.Mutex
	calls map[callKey]*plainCall
}

func newCallTable() *callTable { return &callTable{calls: map[callKey]*plainCall{}} }

// add registers a call and returns the function that removes it.
func (c *callTable) add(k callKey, call *plainCall) func() {
	c.mu.Lock()
	c.calls[k] = call
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		if c.calls[k] == call {
			delete(c.calls, k)
		}
		c.mu.Unlock()
	}
}

func (c *callTable) get(k callKey) (*plainCall, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	call, ok := c.calls[k]
	return call, ok
}

// runningTask is a task whose upstream call runs in this process.
type runningTask struct {
	owner string
	// ctx is what the task's upstream calls run on; cancel ends them.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// release frees the context's resources once the worker is done.
	release func()
	// base is the detached request the call was made from: its headers
	// (session, authorization) address the same upstream session when the
	// gateway must send the upstream a follow-up such as a cancellation.
	base *http.Request
	next http.Handler

	mu           sync.Mutex
	lastProgress json.RawMessage
}

func (rt *runningTask) setProgress(p json.RawMessage) {
	rt.mu.Lock()
	rt.lastProgress = p
	rt.mu.Unlock()
}

func (rt *runningTask) progress() json.RawMessage {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.lastProgress
}

// workerTable maps task ids to the workers running them in this process.
type workerTable struct {
	mu      sync.Mutex
	running map[string]*runningTask
	wg      sync.WaitGroup
}

func newWorkerTable() *workerTable { return &workerTable{running: map[string]*runningTask{}} }

func (wt *workerTable) add(id string, rt *runningTask) {
	wt.mu.Lock()
	wt.running[id] = rt
	wt.mu.Unlock()
}

func (wt *workerTable) remove(id string, rt *runningTask) {
	wt.mu.Lock()
	if wt.running[id] == rt {
		delete(wt.running, id)
	}
	wt.mu.Unlock()
}

func (wt *workerTable) get(id string) (*runningTask, bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	rt, ok := wt.running[id]
	return rt, ok
}

// snapshot copies the table.
func (wt *workerTable) snapshot() map[string]*runningTask {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	out := make(map[string]*runningTask, len(wt.running))
	for id, rt := range wt.running {
		out[id] = rt
	}
	return out
}

// count returns how many workers run now.
func (wt *workerTable) count() int {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	return len(wt.running)
}
