package upstream

import (
	"io"
	"net/http"
	"testing"
)

// A body put back on a request reads whole from its start, closes without
// losing its bytes, and GetBody reads it again, as often as asked.
func TestSetBody(t *testing.T) {
	t.Parallel()
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	r, err := http.NewRequest(http.MethodPost, "http://example.com/mcp", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	SetBody(r, body)
	if r.ContentLength != int64(len(body)) {
		t.Errorf("ContentLength %d, want %d", r.ContentLength, len(body))
	}
	half := make([]byte, len(body)/2)
	if _, err := io.ReadFull(r.Body, half); err != nil || string(half) != string(body[:len(half)]) {
		t.Fatalf("first read %q, %v", half, err)
	}
	if err := r.Body.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		again, err := r.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(again); err != nil || string(got) != string(body) {
			t.Errorf("GetBody read %q, %v; want %q", got, err, body)
		}
	}
	if rest, err := io.ReadAll(r.Body); err != nil || string(rest) != string(body[len(half):]) {
		t.Errorf("the body read on as %q, %v; want %q", rest, err, body[len(half):])
	}
}

// A ReplayBody held where its caller allocates per request puts a body
// back in one allocation, GetBody's: the gateway holds one with the
// envelope of every POST it reads.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestReplayBodySetAllocs(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	r, err := http.NewRequest(http.MethodPost, "http://example.com/mcp", http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	var held struct {
		other [4]int // what else the caller holds per request
		body  ReplayBody
	}
	if n := testing.AllocsPerRun(50, func() { held.body.Set(r, body) }); n > 1 {
		t.Errorf("ReplayBody.Set made %.0f allocations, want 1", n)
	}
	if got, err := io.ReadAll(r.Body); err != nil || string(got) != string(body) {
		t.Errorf("the body read %q, %v; want %q", got, err, body)
	}
	again, err := r.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(again); err != nil || string(got) != string(body) {
		t.Errorf("GetBody read %q, %v; want %q", got, err, body)
	}
	if n := testing.AllocsPerRun(50, func() { SetBody(r, body) }); n > 2 {
		t.Errorf("SetBody made %.0f allocations, want 2", n)
	}
}
