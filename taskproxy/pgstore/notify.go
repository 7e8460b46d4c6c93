package pgstore

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Events between replicas (task.EventSource). Each store publishes the
// events of its process with NOTIFY on the schema's channel, right after the
// write they announce (the hub hands them over once the write returned), and
// listens on one dedicated connection, outside the pool, that reconnects
// with backoff. A payload is the sender's origin, the kind and the task id,
// plus a progress notification's params when they fit: never task data,
// receivers re-read the row. Payloads are sealed, and the channel is named,
// under the schema's secret ([sealEvent]): other roles of the database can
// neither read nor forge them. Notifications can be lost (the listener
// reconnecting, a pooler without LISTEN, NoNotify), so the tasks the process
// has waiters for are also polled: their rows' versions are read every
// EventPoll, and a version that moved wakes the waiters.

// DefaultEventPoll is how often the watched tasks are polled unless
// configured.
const DefaultEventPoll = time.Second

// maxPayload keeps a notification under PostgreSQL's limit (8000 bytes).
// Sealed and in base64, progress params of up to about 5,850 bytes fit.
const maxPayload = 7900

// Payload kinds.
const (
	kindChanged  = 'c'
	kindProgress = 'p'
	kindReleased = 'r'
)

// events is what a store's relays share: how they poll and notify, the
// events' key and channel ([sealEvent]), the count of notifications dropped,
// and the logger.
type events struct {
	*database
	// eventPoll and noNotify are Options.EventPoll and Options.NoNotify.
	eventPoll time.Duration
	noNotify  bool
	// eventAEAD seals the events and eventChannel is their channel, both
	// derived from the cursor secret ([sealEvent]).
	eventAEAD     cipher.AEAD
	eventChannel  string
	droppedEvents atomic.Uint64
	log           *zap.Logger
}

// relay is the task.EventRelay of a store.
type relay struct {
	s       *events
	hub     task.EventSink
	channel string
	origin  string // originLen random bytes
	seq     uint64 // numbers the sealed payloads; the sender's only
	guard   replayGuard
	out     chan task.TaskEvent
	// unsent counts the events queued and not yet through NOTIFY (or
	// dropped), so that Close sends what was queued before it.
	unsent atomic.Int64
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// RelayEvents starts carrying events between hub and the other replicas on
// the schema; see task.EventSource. The first LISTEN is made before it
// returns, so that nothing published after is missed; when it fails the
// listener keeps trying in the background and polling covers meanwhile.
func (s *events) RelayEvents(hub task.EventSink) (task.EventRelay, error) {
	if s.closed.Load() {
		return nil, task.ErrClosed
	}
	var b [originLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, s.fail("naming the event origin", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &relay{s: s, hub: hub, channel: s.eventChannel, origin: string(b[:]),
		out: make(chan task.TaskEvent, 4096), ctx: ctx, cancel: cancel}
	if !s.noNotify {
		conn, _ := r.listen() // a failure is retried by the loop
		r.wg.Add(2)
		go r.listenLoop(conn)
		go r.sendLoop()
	}
	if poll := s.eventPoll; poll >= 0 {
		if poll == 0 {
			poll = DefaultEventPoll
		}
		r.wg.Add(1)
		go r.pollLoop(poll)
	}
	return r, nil
}

// Send queues ev for NOTIFY; when the queue is full the event is dropped
// (polling still finds the change).
func (r *relay) Send(ev task.TaskEvent) {
	if r.s.noNotify {
		return
	}
	r.unsent.Add(1)
	select {
	case r.out <- ev:
	default:
		r.unsent.Add(-1)
	}
}

// closeFlush bounds how long Close waits for queued events to go out.
const closeFlush = 2 * time.Second

// Close sends the events queued so far (for up to closeFlush: a process
// that stops announces what it released last), then stops the listener,
// the sender and the poller.
func (r *relay) Close() error {
	for end := time.Now().Add(closeFlush); !r.s.noNotify && r.unsent.Load() > 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	r.cancel()
	r.wg.Wait()
	return nil
}

// payload seals ev, or returns false when it does not fit (large progress
// params are dropped; the worker's own process still gets them).
func (r *relay) payload(ev task.TaskEvent) (string, bool) {
	kind, params := byte(kindChanged), []byte(nil)
	switch ev.Kind {
	case task.EventProgress:
		kind, params = kindProgress, ev.Params
	case task.EventReleased:
		kind = kindReleased
	}
	if sealedLen(ev.TaskID, params) > maxPayload {
		return "", false
	}
	r.seq++
	p, err := sealEvent(r.s.eventAEAD, r.origin, r.seq, kind, ev.TaskID, params)
	if err != nil {
		return "", false // polling finds the change
	}
	return p, true
}

// sendLoop sends queued events, as many as are waiting in one statement.
func (r *relay) sendLoop() {
	defer r.wg.Done()
	q := `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`
	batch := make([]string, 0, 64)
	seen := map[string]bool{}
	for {
		var ev task.TaskEvent
		select {
		case <-r.ctx.Done():
			return
		case ev = <-r.out:
		}
		batch = batch[:0]
		clear(seen)
		taken := 1
		add := func(ev task.TaskEvent) {
			key := string(ev.Kind) + "|" + ev.TaskID + "|" + string(ev.Params)
			if seen[key] {
				return
			}
			if p, ok := r.payload(ev); ok {
				seen[key] = true
				batch = append(batch, p)
			}
		}
		add(ev)
	more:
		for len(batch) < cap(batch) {
			select {
			case ev = <-r.out:
				taken++
				add(ev)
			default:
				break more
			}
		}
		if len(batch) > 0 {
			ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
			_, err := r.s.pool.Exec(ctx, q, r.channel, batch)
			cancel()
			_ = err // lost: the receivers' polling finds the change
		}
		r.unsent.Add(-int64(taken))
	}
}

// listen opens the dedicated connection and listens on the channel.
func (r *relay) listen() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, r.s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{r.channel}.Sanitize()); err != nil {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listenLoop delivers notifications from other replicas to the hub, and
// reconnects with backoff when the connection breaks. After a reconnect
// every watched task is woken: notifications may have been missed.
func (r *relay) listenLoop(conn *pgx.Conn) {
	defer r.wg.Done()
	backoff := 100 * time.Millisecond
	for {
		if conn == nil {
			select {
			case <-r.ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			var err error
			if conn, err = r.listen(); err != nil {
				continue
			}
			for _, id := range r.hub.Watched() {
				r.hub.Deliver(task.TaskEvent{TaskID: id, Kind: task.EventChanged})
			}
		}
		backoff = 100 * time.Millisecond
		for {
			n, err := conn.WaitForNotification(r.ctx)
			if err != nil {
				break
			}
			r.deliver(n.Payload)
		}
		_ = conn.Close(context.Background())
		conn = nil
		if r.ctx.Err() != nil {
			return
		}
	}
}

// deliver hands a notification of another process to the hub, if it opens
// under the schema's key and is neither stale nor replayed. Events of tasks
// without subscribers here cost the hub one map lookup.
func (r *relay) deliver(payload string) {
	ev, err := openEvent(r.s.eventAEAD, payload)
	if err == nil && ev.origin == r.origin {
		return // ours, delivered locally already
	}
	if err == nil && !r.guard.fresh(ev, time.Now()) {
		err = errors.New("stale or replayed")
	}
	if err != nil {
		r.s.droppedEvents.Add(1)
		if ce := r.s.log.Check(zap.DebugLevel, "dropped a notification that is not a sealed event of this schema"); ce != nil {
			ce.Write(zap.String("channel", r.channel), zap.Int("bytes", len(payload)), zap.Error(err))
		}
		return
	}
	switch ev.kind {
	case kindChanged:
		r.hub.Deliver(task.TaskEvent{TaskID: ev.id, Kind: task.EventChanged})
	case kindProgress:
		r.hub.Deliver(task.TaskEvent{TaskID: ev.id, Kind: task.EventProgress, Params: ev.params})
	case kindReleased:
		r.hub.Deliver(task.TaskEvent{TaskID: ev.id, Kind: task.EventReleased})
	}
}

// DroppedEvents counts the notifications this store's relays dropped
// because they did not open under the schema's key (forged, or another
// schema's) or were stale or replayed (for tests and metrics).
func (s *events) DroppedEvents() uint64 { return s.droppedEvents.Load() }

// pollLoop reads the versions of the watched tasks every interval and wakes
// the waiters of a task whose version moved, appeared or vanished. A task
// seen for the first time wakes its waiters too: it may have changed
// between their subscription and the first poll.
func (r *relay) pollLoop(interval time.Duration) {
	defer r.wg.Done()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	versions := map[string]int64{}
	q := `SELECT id, version FROM ` + pgx.Identifier{r.s.schema}.Sanitize() + `.tasks WHERE id = ANY($1)`
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick.C:
		}
		ids := r.hub.Watched()
		if len(ids) == 0 {
			clear(versions)
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
		rows, err := r.s.pool.Query(ctx, q, ids)
		current := make(map[string]int64, len(ids))
		if err == nil {
			var id string
			var v int64
			_, err = pgx.ForEachRow(rows, []any{&id, &v}, func() error {
				current[id] = v
				return nil
			})
		}
		cancel()
		if err != nil {
			if errors.Is(err, context.Canceled) && r.ctx.Err() != nil {
				return
			}
			continue // the next tick tries again
		}
		next := make(map[string]int64, len(ids))
		for _, id := range ids {
			v, ok := current[id]
			if !ok {
				v = -1 // gone: swept
			}
			if prev, known := versions[id]; !known || prev != v {
				r.hub.Deliver(task.TaskEvent{TaskID: id, Kind: task.EventChanged})
			}
			next[id] = v
		}
		versions = next
	}
}

var (
	_ task.EventSource = (*Store)(nil)
	_ task.EventRelay  = (*relay)(nil)
)
