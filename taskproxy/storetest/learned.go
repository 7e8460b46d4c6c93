package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// What was learned of an upstream: a value per key, replaced by a later
// save, gone once its ttl has passed.

func testLearned(t *testing.T, s task.Store) {
	ctx := context.Background()
	if _, err := s.LoadLearned(ctx, "srv0#0"); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("nothing saved: %v, want ErrNotFound", err)
	}
	steps := []struct {
		key, value string
	}{{"srv0#0", `{"tasksCall":false}`}, {"srv0#0", `{"tasksCall":true}`}, {"srv0#1", `{"other":1}`}}
	for _, st := range steps {
		if err := s.SaveLearned(ctx, st.key, []byte(st.value), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for key, want := range map[string]string{"srv0#0": `{"tasksCall":true}`, "srv0#1": `{"other":1}`} {
		if got, err := s.LoadLearned(ctx, key); err != nil || string(got) != want {
			t.Errorf("%s: %q / %v, want %q (the last save)", key, got, err, want)
		}
	}
	if _, err := s.LoadLearned(ctx, "srv0#"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("a prefix of a key: %v, want ErrNotFound", err)
	}
}

// A learned value is gone once its ttl has passed; saving it again with a
// longer ttl keeps it.
func testLearnedExpires(t *testing.T, s task.Store) {
	ctx := context.Background()
	for key, ttl := range map[string]time.Duration{"short": time.Second, "kept": time.Hour} {
		if err := s.SaveLearned(ctx, key, []byte("v"), ttl); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "a learned value with a 1s ttl expires", func() bool {
		_, err := s.LoadLearned(ctx, "short")
		return errors.Is(err, task.ErrNotFound)
	})
	if v, err := s.LoadLearned(ctx, "kept"); err != nil || string(v) != "v" {
		t.Errorf("a value saved for an hour: %q / %v", v, err)
	}
	if err := s.SaveLearned(ctx, "short", []byte("again"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if v, err := s.LoadLearned(ctx, "short"); err != nil || string(v) != "again" {
		t.Errorf("saved again after it expired: %q / %v", v, err)
	}
}
