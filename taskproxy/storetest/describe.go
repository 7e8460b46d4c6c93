package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A session's client description lives with its binding: only the owner
// writes and reads it, a refresh or a rebinding by the owner keeps it, and
// it ends with the binding.

func testSessionDescription(t *testing.T, s task.Store) {
	ctx := context.Background()
	if err := s.BindSession(ctx, "D1", "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	read := func(id, owner string) func() (string, error) {
		return func() (string, error) {
			d, err := s.SessionDescription(ctx, id, owner)
			if err == nil && d == nil {
				return "<none>", nil
			}
			return string(d), err
		}
	}
	write := func(id, owner, desc string) func() (string, error) {
		return func() (string, error) { return "", s.DescribeSession(ctx, id, owner, []byte(desc)) }
	}
	tests := []struct {
		name    string
		op      func() (string, error)
		want    string
		wantErr error // nil, ErrForeign, or ErrNotFound meaning exactly that (not ErrForeign)
	}{
		{"a binding without a description", read("D1", "alice"), "<none>", nil},
		{"the owner describes", write("D1", "alice", `{"v":1}`), "", nil},
		{"the owner reads it", read("D1", "alice"), `{"v":1}`, nil},
		{"another owner reads", read("D1", "bob"), "", task.ErrForeign},
		{"another owner describes", write("D1", "bob", "bob's"), "", task.ErrForeign},
		{"unchanged", read("D1", "alice"), `{"v":1}`, nil},
		{"an unbound session", write("D2", "alice", "x"), "", task.ErrNotFound},
		{"nothing stored for it", read("D2", "alice"), "", task.ErrNotFound},
		{"a prefix of the id is another session", read("D", "alice"), "", task.ErrNotFound},
		{"replaced", write("D1", "alice", `{"v":2}`), "", nil},
		{"the new one", read("D1", "alice"), `{"v":2}`, nil},
		{"an empty description", write("D1", "alice", ""), "", nil},
		{"is one", read("D1", "alice"), "", nil},
		{"described again", write("D1", "alice", `{"v":3}`), "", nil},
		{"a refresh keeps it", func() (string, error) { return "", s.CheckSession(ctx, "D1", "alice", 2*time.Hour) }, "", nil},
		{"kept by the refresh", read("D1", "alice"), `{"v":3}`, nil},
		{"the owner binds again", func() (string, error) { return "", s.BindSession(ctx, "D1", "alice", time.Hour) }, "", nil},
		{"kept by the rebinding", read("D1", "alice"), `{"v":3}`, nil},
		{"forget", func() (string, error) { return "", s.ForgetSession(ctx, "D1") }, "", nil},
		{"gone with the binding", read("D1", "alice"), "", task.ErrNotFound},
		{"bob binds the forgotten id", func() (string, error) { return "", s.BindSession(ctx, "D1", "bob", time.Hour) }, "", nil},
		{"with no description of alice's", read("D1", "bob"), "<none>", nil},
	}
	for _, tt := range tests {
		got, err := tt.op()
		switch {
		case tt.wantErr == nil && err != nil,
			tt.wantErr != nil && !errors.Is(err, tt.wantErr),
			errors.Is(tt.wantErr, task.ErrNotFound) && !errors.Is(tt.wantErr, task.ErrForeign) && errors.Is(err, task.ErrForeign):
			t.Errorf("%s: %v, want %v", tt.name, err, tt.wantErr)
		case err == nil && got != tt.want:
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// A description expires with its binding: a refreshed binding keeps it,
// and an expired id bound again by another owner comes without it.
func testSessionDescriptionExpires(t *testing.T, s task.Store) {
	ctx := context.Background()
	for _, id := range []string{"short", "refreshed"} {
		if err := s.BindSession(ctx, id, "alice", time.Second); err != nil {
			t.Fatal(err)
		}
		if err := s.DescribeSession(ctx, id, "alice", []byte("alice's "+id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CheckSession(ctx, "refreshed", "alice", time.Hour); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "a binding with a 1s ttl expires", func() bool {
		return errors.Is(s.CheckSession(ctx, "short", "alice", 0), task.ErrNotFound)
	})
	if _, err := s.SessionDescription(ctx, "short", "alice"); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("the description of an expired binding: %v, want ErrNotFound", err)
	}
	if d, err := s.SessionDescription(ctx, "refreshed", "alice"); err != nil || string(d) != "alice's refreshed" {
		t.Errorf("the description of a binding refreshed to an hour: %q, %v", d, err)
	}
	if err := s.BindSession(ctx, "short", "bob", time.Hour); err != nil {
		t.Fatal(err)
	}
	if d, err := s.SessionDescription(ctx, "short", "bob"); err != nil || d != nil {
		t.Errorf("bob's new binding of an expired id: description %q, %v; want none", d, err)
	}
}
