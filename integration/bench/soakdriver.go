package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// soakDriver runs the soak's flows against one gateway: a steady mix of
// both protocol versions, each flow a short conversation that checks what
// it gets (see soakflows2025.go and soakflows2026.go). The flows take
// turns among peers: clients of their own source addresses (127.0.0.N),
// as many clients are, since the gateway counts an anonymous caller's
// long-lived answers per address.
type soakDriver struct {
	peers []*soakPeer
	t     *tally

	// loading is set while the mix runs (samples taken otherwise are of
	// the pauses).
	loading atomic.Bool

	// behind counts ticks of the pacer that found every flow slot taken:
	// the machine did not keep up with the rate asked for.
	behind atomic.Int64
}

// soakPeer is one client: its connections, from an address of its own,
// and its 2025-11-25 sessions, shared by its flows.
type soakPeer struct {
	c     *soakClient
	t     *tally
	ttlMs int64 // the ttl 2025-11-25 flows ask for

	mu       sync.Mutex
	sessions []string
}

func newSoakDriver(url string, peers int, ttl time.Duration) *soakDriver {
	d := &soakDriver{t: newTally()}
	for i := range peers {
		local := net.IPv4(127, 0, 0, byte(10+i))
		d.peers = append(d.peers, &soakPeer{c: newSoakClient(url, local), t: d.t, ttlMs: ttl.Milliseconds()})
	}
	return d
}

// openSessions opens n sessions for every peer.
func (d *soakDriver) openSessions(ctx context.Context, n int) error {
	for _, p := range d.peers {
		if err := p.openSessions(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// closeSessions ends every peer's sessions and closes its idle connections.
func (d *soakDriver) closeSessions(ctx context.Context) error {
	for _, p := range d.peers {
		if err := p.closeSessions(ctx); err != nil {
			return err
		}
		p.c.hc.CloseIdleConnections()
	}
	return nil
}

// flow is one kind of conversation in the mix.
type flow struct {
	name string
	run  func(ctx context.Context, p *soakPeer) error
}

// soakFlows is the mix, run in turn, so that each kind gets the same share
// of the rate.
func soakFlows() []flow {
	return slices.Concat(flows2025(), flows2026())
}

// flowTimeout bounds one flow: a flow still going after it has met a hang,
// which is an unexpected error like any other.
const flowTimeout = 2 * time.Minute

// maxInflight bounds the flows running at once.
const maxInflight = 256

// run starts a flow rate times a second until ctx ends, then waits for the
// flows under way.
func (d *soakDriver) run(ctx context.Context, rate float64) {
	flows := soakFlows()
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	slots := make(chan struct{}, maxInflight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case slots <- struct{}{}:
		default:
			d.behind.Add(1)
			continue
		}
		f, p := flows[i%len(flows)], d.peers[i%len(d.peers)]
		wg.Go(func() {
			defer func() { <-slots }()
			fctx, cancel := context.WithTimeout(context.Background(), flowTimeout)
			defer cancel()
			d.t.flowDone(f.name, f.run(fctx, p))
		})
	}
}

// warmUp runs every flow once, one after another, so that what the
// gateway starts once and keeps (store connections, caches) is there
// before the idle count is taken.
func (d *soakDriver) warmUp() error {
	for _, f := range soakFlows() {
		ctx, cancel := context.WithTimeout(context.Background(), flowTimeout)
		err := f.run(ctx, d.peers[0])
		cancel()
		d.t.flowDone(f.name, err)
		if err != nil {
			return fmt.Errorf("warm-up flow %s: %w", f.name, err)
		}
	}
	return nil
}

// ok sends a request and wants a result, decoded into out when out is not
// nil.
func (d *soakPeer) ok(ctx context.Context, label string, h http.Header, method string, params, out any) error {
	m, _, err := d.c.call(ctx, h, method, params)
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	if m.Error != nil {
		return fmt.Errorf("%s: error %d %s", label, m.Error.Code, m.Error.Message)
	}
	if out != nil {
		if err := json.Unmarshal(m.Result, out); err != nil {
			return fmt.Errorf("%s: decoding %.200s: %w", label, m.Result, err)
		}
	}
	d.t.add(label, outcomeOK)
	return nil
}

// refused sends a request the gateway must refuse with code, its message
// holding want.
func (d *soakPeer) refused(ctx context.Context, label string, h http.Header, method string, params any, code int, want string) error {
	m, _, err := d.c.call(ctx, h, method, params)
	if err != nil {
		return fmt.Errorf("%s: %w", label, err)
	}
	if m.Error == nil || m.Error.Code != code || !strings.Contains(m.Error.Message, want) {
		return fmt.Errorf("%s: got %s, want error %d containing %q", label, answered(m), code, want)
	}
	d.t.add(label, outcomeRefused)
	return nil
}

// pollStatus calls get every pollEvery until the task's status is want;
// a task that ends otherwise is an error.
func pollStatus(ctx context.Context, want string, get func() (string, error)) error {
	for {
		status, err := get()
		if err != nil {
			return err
		}
		if status == want {
			return nil
		}
		if status != "working" && status != "input_required" {
			return fmt.Errorf("task ended %s, want %s", status, want)
		}
		if err := sleepCtx(ctx, pollEvery); err != nil {
			return fmt.Errorf("waiting for status %s (still %s): %w", want, status, err)
		}
	}
}

// pollEvery is how often the flows poll tasks/get: more often than the
// gateway's suggested interval, so that polls are a good share of the load.
const pollEvery = 200 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// session returns one of the shared 2025-11-25 sessions.
func (d *soakPeer) session() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sessions[rand.IntN(len(d.sessions))]
}

// openSessions opens the shared 2025-11-25 sessions.
func (d *soakPeer) openSessions(ctx context.Context, n int) error {
	for range n {
		sid, err := d.initialize(ctx)
		if err != nil {
			return err
		}
		d.mu.Lock()
		d.sessions = append(d.sessions, sid)
		d.mu.Unlock()
	}
	return nil
}

// closeSessions ends the shared sessions, as clients that leave do.
func (d *soakPeer) closeSessions(ctx context.Context) error {
	d.mu.Lock()
	sessions := d.sessions
	d.sessions = nil
	d.mu.Unlock()
	for _, sid := range sessions {
		if err := d.deleteSession(ctx, sid); err != nil {
			return err
		}
	}
	return nil
}
