package taskproxy

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A client that stops reading makes the event write fail within the write
// timeout instead of blocking the handler forever.
func TestSSEWriterDeadline(t *testing.T) {
	old := sseWriteTimeout
	sseWriteTimeout = 200 * time.Millisecond
	defer func() { sseWriteTimeout = old }()
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse := StartSSE(w)
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			if err := sse.WriteEvent("", chunk); err != nil {
				done <- err
				return
			}
		}
	}))
	defer srv.Close()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	select { // never read: the handler's write must give up
	case err := <-done:
		if !strings.Contains(err.Error(), "writing event") {
			t.Errorf("error %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the event write blocked on a client that does not read")
	}
}

func TestStreamTable(t *testing.T) {
	s := newStreamTable()
	for i := range maxStreamsPerOwner {
		if !s.acquire("alice") {
			t.Fatalf("stream %d refused", i+1)
		}
	}
	tests := []struct {
		key  string
		want bool
	}{{"alice", false}, {"bob", true}}
	for _, tt := range tests {
		if got := s.acquire(tt.key); got != tt.want {
			t.Errorf("acquire(%s) = %v, want %v", tt.key, got, tt.want)
		}
	}
	s.release("alice")
	if !s.acquire("alice") {
		t.Error("a released slot was not reusable")
	}
}

func TestResultResumeID(t *testing.T) {
	tests := []struct {
		name, in string
		task     string
		id       string
		ok       bool
	}{
		{"number id", resultResumeID("T1", json.RawMessage(`7`)), "T1", `7`, true},
		{"string id", resultResumeID("T2", json.RawMessage(`"a:b"`)), "T2", `"a:b"`, true},
		{"input id", string(inputID("T3", "k")), "", "", false},
		{"foreign", "42", "", "", false},
		{"bad id", gatewayIDPrefix + "T:result:!!:x", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task, id, ok := parseResultResumeID(tt.in)
			if ok != tt.ok || task != tt.task || string(id) != tt.id {
				t.Errorf("parse(%q) = %q %s %v", tt.in, task, id, ok)
			}
		})
	}
	if resultResumeID("T", json.RawMessage(`1`)) == resultResumeID("T", json.RawMessage(`1`)) {
		t.Error("resume ids repeat")
	}
}
