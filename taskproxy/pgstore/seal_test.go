package pgstore

import (
	"testing"
	"time"
)

// A sealed event opens under its schema's key only, and a receiver takes
// each sender's events once, in order, and only while fresh.
func TestSealedEvents(t *testing.T) {
	t.Parallel()
	aead, channel, err := eventKeys(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	other, otherChannel, err := eventKeys([]byte("another schema's secret, 32 byte"))
	if err != nil {
		t.Fatal(err)
	}
	if channel == otherChannel || len(channel) > 63 {
		t.Fatalf("channels %q and %q", channel, otherChannel)
	}
	p, err := sealEvent(aead, "origin-1", 7, kindProgress, "task-1", []byte(`{"progress":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(p) != sealedLen("task-1", []byte(`{"progress":1}`)) {
		t.Errorf("sealed %d bytes, sealedLen says %d", len(p), sealedLen("task-1", []byte(`{"progress":1}`)))
	}
	ev, err := openEvent(aead, p)
	if err != nil || ev.origin != "origin-1" || ev.seq != 7 || ev.kind != kindProgress || ev.id != "task-1" || string(ev.params) != `{"progress":1}` {
		t.Fatalf("opened %+v, %v", ev, err)
	}
	for name, payload := range map[string]string{
		"another key": p,
		"tampered":    tamper(p),
		"truncated":   p[:20],
		"clear":       "origin|c|task-1",
		"empty":       "",
	} {
		key := aead
		if name == "another key" {
			key = other
		}
		if _, err := openEvent(key, payload); err == nil {
			t.Errorf("%s: opened", name)
		}
	}

	now := time.Now()
	at := func(origin string, seq uint64, sent time.Time) openedEvent {
		return openedEvent{origin: origin, seq: seq, sent: sent}
	}
	var g replayGuard
	for i, c := range []struct {
		ev   openedEvent
		now  time.Time
		want bool
	}{
		{at("a", 1, now), now, true},
		{at("a", 1, now), now, false}, // replayed
		{at("a", 3, now), now, true},  // a lost one in between is fine
		{at("a", 2, now), now, false}, // older than the last
		{at("b", 1, now), now, true},  // another sender
		{at("c", 1, now.Add(-3*time.Minute)), now, false},
		{at("c", 1, now.Add(3*time.Minute)), now, false},
		{at("c", 1, now.Add(-time.Minute)), now, true},
		// a sender silent for long is forgotten, and its old events are
		// stale by then
		{at("d", 1, now.Add(11*time.Minute)), now.Add(11 * time.Minute), true},
		{at("a", 1, now), now.Add(11 * time.Minute), false},
	} {
		if got := g.fresh(c.ev, c.now); got != c.want {
			t.Errorf("case %d (%s seq %d): fresh %v, want %v", i, c.ev.origin, c.ev.seq, got, c.want)
		}
	}
	if _, ok := g.last["a"]; ok {
		t.Error("a sender silent for 11 minutes is still remembered")
	}
}

// tamper changes one base64 digit in the middle of p (the last may carry
// unused bits).
func tamper(p string) string {
	b := []byte(p)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}
