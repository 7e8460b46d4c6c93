package wire

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What an upstream's initialize answer declared of task calls, kept in the
// store under the route's name: every replica of a configuration and the
// next process serve the same route, and each session's initialize passes
// through one of them only. The record lives for learnedTTL, refreshed by
// the initialize answers passing through, so that an upstream that changed
// is learned anew; a route recalls it when a request needs it and it has
// seen no initialize answer itself.

const (
	// learnedTTL bounds the age of a stored record.
	learnedTTL = 24 * time.Hour
	// learnedRefresh is how old this process's last save of an unchanged
	// record gets before an initialize answer saves it again.
	learnedRefresh = learnedTTL / 4
	// recallRetry spaces the reads of a record the store did not have.
	recallRetry = 10 * time.Second
	// learnedTimeout bounds one read or write of a record.
	learnedTimeout = 5 * time.Second
)

// capsRecord is where a route keeps what its upstream's initialize answer
// declared: the store, under the route's key, and when this route last
// saved or tried to recall it.
type capsRecord struct {
	store func() task.LearnedStore // nil until KeepIn; the store may be nil until it opens
	key   string
	log   *zap.Logger
	// saved and savedCall are this route's last save; recalled is its
	// last read of the store.
	saved     time.Time
	savedCall bool
	recalled  time.Time
}

// learnedRecord is the stored value.
type learnedRecord struct {
	// TasksCall is whether capabilities.tasks.requests.tools.call was
	// declared.
	TasksCall *bool `json:"tasksCall"`
}

// KeepIn makes u keep what the upstream's initialize answers declare in
// the store store returns, under route (the route's name, the same on every
// replica and after a restart), and recall it from there.
func (u *UpstreamCaps) KeepIn(store func() task.LearnedStore, route string, log *zap.Logger) {
	if log == nil {
		log = zap.NewNop()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.record = capsRecord{store: store, key: "upstream-caps/" + route, log: log}
}

// due reports whether call, just learned, is to be saved: it changed since
// this route's last save, or that save is getting old. It marks it saved.
// u.mu is held.
func (r *capsRecord) due(call bool) bool {
	if r.store == nil || r.savedCall == call && time.Since(r.saved) < learnedRefresh {
		return false
	}
	r.saved, r.savedCall = time.Now(), call
	return true
}

// save stores call. A failure is logged and the next initialize answer
// tries again: until a save succeeds, other processes learn the tools'
// modes from the upstream's tools/list, as for a store without a record.
func (u *UpstreamCaps) save(call bool) {
	store := u.record.store()
	if store == nil {
		u.forgetSave()
		return
	}
	value, _ := json.Marshal(learnedRecord{TasksCall: &call})
	ctx, cancel := context.WithTimeout(context.Background(), learnedTimeout)
	defer cancel()
	if err := store.SaveLearned(ctx, u.record.key, value, learnedTTL); err != nil {
		u.record.log.Warn("keeping what the upstream's initialize answer declared in the store; other replicas learn it from the upstream", zap.Error(err))
		u.forgetSave()
	}
}

// forgetSave makes the next initialize answer save again.
func (u *UpstreamCaps) forgetSave() {
	u.mu.Lock()
	u.record.saved = time.Time{}
	u.mu.Unlock()
}

// Recall reads what the upstream's initialize answer declared from the
// store when this route has seen none itself: the session's initialize
// went through another process, replica or configuration. A store without
// a record (none saved yet, expired, or a store of an earlier version)
// leaves it unknown, and is asked again after recallRetry.
func (u *UpstreamCaps) Recall(ctx context.Context) {
	u.mu.Lock()
	if u.tasksCall != nil || u.record.store == nil || time.Since(u.record.recalled) < recallRetry {
		u.mu.Unlock()
		return
	}
	u.record.recalled = time.Now()
	u.mu.Unlock()
	store := u.record.store()
	if store == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), learnedTimeout)
	defer cancel()
	value, err := store.LoadLearned(ctx, u.record.key)
	if err != nil {
		if !errors.Is(err, task.ErrNotFound) {
			u.record.log.Warn("recalling what the upstream's initialize answer declared", zap.Error(err))
		}
		return
	}
	var rec learnedRecord
	if json.Unmarshal(value, &rec) != nil || rec.TasksCall == nil {
		return
	}
	u.mu.Lock()
	if u.tasksCall == nil { // an initialize answer seen meanwhile is newer
		u.tasksCall = rec.TasksCall
	}
	u.mu.Unlock()
}
