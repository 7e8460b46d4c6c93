package runtime

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestProgressMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 150) // 300 bytes
	tests := []struct {
		params string
		want   string
		ok     bool
	}{
		{`{"progressToken":1,"progress":3,"total":6,"message":"Analyzing content"}`, "progress 3/6: Analyzing content", true},
		{`{"progressToken":1,"progress":3,"message":"Analyzing"}`, "progress 3: Analyzing", true},
		{`{"progressToken":1,"progress":0.5,"total":1}`, "progress 0.5/1", true},
		{`{"progressToken":1,"progress":3}`, "progress 3", true},
		// Integral floats, as runtimes that keep numbers as floats send them.
		{`{"progressToken":1,"progress":3.0,"total":6.0,"message":"Analyzing"}`, "progress 3/6: Analyzing", true},
		{`{"progressToken":1,"progress":2.5e1,"total":1e2}`, "progress 25/100", true},
		{`{"progressToken":1,"progress":1e400}`, "progress 1e400", true},
		{`{"progressToken":1,"progress":0.` + strings.Repeat("1", 100) + `}`, "progress 0." + strings.Repeat("1", 30) + "…", true},
		{`{"progressToken":1,"progress":3,"total":"six"}`, "progress 3", true},
		{`{"progressToken":1,"progress":"3"}`, "", false},
		{`{"progressToken":1}`, "", false},
		{`{"progressToken":1,"progress":1,"message":"` + long + `"}`, "progress 1: " + long[:200] + "…", true},
	}
	for _, tt := range tests {
		got, ok := progressMessage(json.RawMessage(tt.params))
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: %q, %v; want %q, %v", tt.params, got, ok, tt.want, tt.ok)
		}
	}
}

// Progress is written at once, then at most once per interval, the latest
// kept for when the interval has passed.
func TestProgressStatusPacing(t *testing.T) {
	t.Parallel()
	var p progressStatus
	defer p.stop()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if msg, ok := p.offer("a", t0); !ok || msg != "a" {
		t.Fatalf("first offer = %q, %v", msg, ok)
	}
	if _, ok := p.offer("b", t0.Add(100*time.Millisecond)); ok {
		t.Fatal("second offer within the interval written at once")
	}
	if _, ok := p.offer("c", t0.Add(200*time.Millisecond)); ok {
		t.Fatal("third offer within the interval written at once")
	}
	if p.due() == nil {
		t.Fatal("nothing armed for the kept message")
	}
	if msg, ok := p.fire(t0.Add(progressStatusInterval)); !ok || msg != "c" {
		t.Fatalf("fire = %q, %v; want the latest, c", msg, ok)
	}
	if p.due() != nil {
		t.Error("still armed after firing")
	}
	if msg, ok := p.offer("d", t0.Add(2*progressStatusInterval)); !ok || msg != "d" {
		t.Errorf("offer after the interval = %q, %v", msg, ok)
	}
}
