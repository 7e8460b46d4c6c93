package task

import (
	"context"
	"time"
)

// StoreOp names a Store call coarsely, for latency metrics: the methods
// that do the same kind of work share one.
type StoreOp uint8

// The store operations.
const (
	OpCreate    StoreOp = iota // Create, CreateWithin, CreateWithinLimits
	OpGet                      // Get, GetSummary
	OpUpdate                   // Update
	OpList                     // List, ListActive
	OpCount                    // CountActive
	OpAcquire                  // Acquire (a task's lease)
	OpSweep                    // Sweep
	OpSession                  // BindSession, CheckSession, ForgetSession, DescribeSession, SessionDescription
	OpLearned                  // SaveLearned, LoadLearned
	NumStoreOps                // how many there are
)

var storeOpNames = [NumStoreOps]string{"create", "get", "update", "list", "count", "acquire", "sweep", "session", "learned"}

// String is the operation's metric label.
func (op StoreOp) String() string {
	if op < NumStoreOps {
		return storeOpNames[op]
	}
	return "unknown"
}

// StoreTimer is told how long each store call took. It must be cheap and
// safe for concurrent use.
type StoreTimer interface {
	StoreCall(op StoreOp, took time.Duration)
}

// TimedStore is a Store that tells a StoreTimer how long each call of the
// one it wraps took (Holder and Close are not timed). It adds a clock
// reading before and after each call and allocates nothing.
//
// It has the methods of Store only, and GetSummary (task.GetSummary's
// fallback when the wrapped store reads no summary of its own): a backend's
// optional interfaces (AdminLister, Leader, EventSource, ...) are hidden
// by the wrapper. A caller that knows the backend's type keeps them by
// embedding both, the backend one level deeper, as
//
//	type timedBackend struct {
//		*task.TimedStore
//		backendExtras // struct{ *backend.Store }
//	}
//
// so that the Store methods come from the TimedStore and the others from
// the backend.
type TimedStore struct {
	store Store
	timer StoreTimer
}

// NewTimedStore wraps s, timing its calls for timer.
func NewTimedStore(s Store, timer StoreTimer) *TimedStore {
	return &TimedStore{store: s, timer: timer}
}

// Unwrap returns the wrapped store.
func (s *TimedStore) Unwrap() Store { return s.store }

func (s *TimedStore) done(op StoreOp, start time.Time) { s.timer.StoreCall(op, time.Since(start)) }

func (s *TimedStore) Create(ctx context.Context, t *Task) error {
	defer s.done(OpCreate, time.Now())
	return s.store.Create(ctx, t)
}

func (s *TimedStore) CreateWithin(ctx context.Context, t *Task, maxActive int) error {
	defer s.done(OpCreate, time.Now())
	return s.store.CreateWithin(ctx, t, maxActive)
}

func (s *TimedStore) CreateWithinLimits(ctx context.Context, t *Task, l Limits) error {
	defer s.done(OpCreate, time.Now())
	return s.store.CreateWithinLimits(ctx, t, l)
}

func (s *TimedStore) Get(ctx context.Context, owner, id string) (*Task, error) {
	defer s.done(OpGet, time.Now())
	return s.store.Get(ctx, owner, id)
}

// GetSummary reads through the wrapped store's GetSummary when it has one,
// else through its Get (task.GetSummary).
func (s *TimedStore) GetSummary(ctx context.Context, owner, id string) (*Task, error) {
	defer s.done(OpGet, time.Now())
	return GetSummary(ctx, s.store, owner, id)
}

func (s *TimedStore) Update(ctx context.Context, owner, id string, fn func(*Task) error) (*Task, error) {
	defer s.done(OpUpdate, time.Now())
	return s.store.Update(ctx, owner, id, fn)
}

func (s *TimedStore) List(ctx context.Context, owner, cursor string, limit int) ([]*Task, string, error) {
	defer s.done(OpList, time.Now())
	return s.store.List(ctx, owner, cursor, limit)
}

func (s *TimedStore) CountActive(ctx context.Context, quota string) (int, error) {
	defer s.done(OpCount, time.Now())
	return s.store.CountActive(ctx, quota)
}

func (s *TimedStore) ListActive(ctx context.Context, cursor string, limit int) ([]*Task, string, error) {
	defer s.done(OpList, time.Now())
	return s.store.ListActive(ctx, cursor, limit)
}

func (s *TimedStore) Holder() string { return s.store.Holder() }

func (s *TimedStore) Acquire(ctx context.Context, owner, id, holder string, now time.Time, ttl time.Duration) (*Task, error) {
	defer s.done(OpAcquire, time.Now())
	return s.store.Acquire(ctx, owner, id, holder, now, ttl)
}

func (s *TimedStore) Sweep(ctx context.Context, now time.Time, batch int) (int, error) {
	defer s.done(OpSweep, time.Now())
	return s.store.Sweep(ctx, now, batch)
}

func (s *TimedStore) Close() error { return s.store.Close() }

func (s *TimedStore) BindSession(ctx context.Context, sessionID, owner string, ttl time.Duration) error {
	defer s.done(OpSession, time.Now())
	return s.store.BindSession(ctx, sessionID, owner, ttl)
}

func (s *TimedStore) CheckSession(ctx context.Context, sessionID, owner string, refresh time.Duration) error {
	defer s.done(OpSession, time.Now())
	return s.store.CheckSession(ctx, sessionID, owner, refresh)
}

func (s *TimedStore) ForgetSession(ctx context.Context, sessionID string) error {
	defer s.done(OpSession, time.Now())
	return s.store.ForgetSession(ctx, sessionID)
}

func (s *TimedStore) DescribeSession(ctx context.Context, sessionID, owner string, desc []byte) error {
	defer s.done(OpSession, time.Now())
	return s.store.DescribeSession(ctx, sessionID, owner, desc)
}

func (s *TimedStore) SessionDescription(ctx context.Context, sessionID, owner string) ([]byte, error) {
	defer s.done(OpSession, time.Now())
	return s.store.SessionDescription(ctx, sessionID, owner)
}

func (s *TimedStore) SaveLearned(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	defer s.done(OpLearned, time.Now())
	return s.store.SaveLearned(ctx, key, value, ttl)
}

func (s *TimedStore) LoadLearned(ctx context.Context, key string) ([]byte, error) {
	defer s.done(OpLearned, time.Now())
	return s.store.LoadLearned(ctx, key)
}

// Interface guards
var (
	_ Store         = (*TimedStore)(nil)
	_ SummaryReader = (*TimedStore)(nil)
)
