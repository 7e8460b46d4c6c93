package integration

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgBlackhole stands between a gateway and its PostgreSQL server as the
// network does: it forwards TCP connections to the server until frozen;
// frozen, it keeps every connection open and passes nothing, as a network
// that drops packets does (no reset, no answer).
type pgBlackhole struct {
	ln      net.Listener
	network string
	target  string
	frozen  atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
}

// newPGBlackhole starts a blackhole in front of dsn's server and returns it
// with the DSN that reaches the server through it.
func newPGBlackhole(t testing.TB, dsn string) (*pgBlackhole, string) {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("parsing the test DSN: %v", err)
	}
	b := &pgBlackhole{network: "tcp", target: net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))}
	if strings.HasPrefix(cfg.Host, "/") {
		b.network, b.target = "unix", fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port)
	}
	if b.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.close)
	go b.serve()
	port := strconv.Itoa(b.ln.Addr().(*net.TCPAddr).Port)
	if isURLDSN(dsn) {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.Host = "127.0.0.1:" + port
		return b, u.String()
	}
	return b, dsn + " host=127.0.0.1 port=" + port // the last setting of a key wins
}

func (b *pgBlackhole) freeze() { b.frozen.Store(true) }
func (b *pgBlackhole) thaw()   { b.frozen.Store(false) }

func (b *pgBlackhole) track(c net.Conn) {
	b.mu.Lock()
	b.conns = append(b.conns, c)
	b.mu.Unlock()
}

func (b *pgBlackhole) close() {
	_ = b.ln.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		_ = c.Close()
	}
}

func (b *pgBlackhole) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.track(c)
		if b.frozen.Load() { // a new connection gets nowhere either
			go func() { _, _ = io.Copy(io.Discard, c) }()
			continue
		}
		s, err := net.Dial(b.network, b.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		b.track(s)
		go b.pipe(c, s)
		go b.pipe(s, c)
	}
}

// pipe copies from src to dst, dropping what arrives while frozen.
func (b *pgBlackhole) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !b.frozen.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}
