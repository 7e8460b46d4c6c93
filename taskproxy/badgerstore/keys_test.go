package badgerstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The keys of a task's record and indexes are byte for byte those of the
// format stores on disk already hold: prefix, owner hash, %016x of the time
// and the id.
func TestKeysFormat(t *testing.T) {
	t.Parallel()
	hash := func(owner string) string {
		sum := sha256.Sum256([]byte(owner))
		return hex.EncodeToString(sum[:16])
	}
	created := time.Date(2026, 12, 6, 10, 0, 0, 123, time.UTC)
	tests := []struct {
		name string
		t    *task.Task
	}{
		{"anonymous", &task.Task{ID: "9sle5G8nJypWiKEpw-_TZA", Owner: task.Anonymous, CreatedAt: created, TTL: time.Hour}},
		{"principal with a quota key", &task.Task{ID: "x", Owner: "o:alice", QuotaKey: "ip:192.0.2.1", CreatedAt: created, TTL: time.Minute}},
		{"the epoch", &task.Task{ID: "e", Owner: "o:bob", CreatedAt: time.Unix(0, 0), TTL: 0}},
		{"before 1970", &task.Task{ID: "old", Owner: "o:carol", CreatedAt: time.Unix(-5, 0), TTL: time.Second}},
		{"an empty owner", &task.Task{ID: "z", CreatedAt: created, TTL: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tk := tt.t
			want := map[string]string{
				"record":          "t/" + tk.ID,
				"header":          "h/" + tk.ID,
				"lease":           "l/" + tk.ID,
				"owner hash":      hash(tk.Owner),
				"owner prefix":    "o/" + hash(tk.Owner) + "/",
				"owner":           fmt.Sprintf("o/%s/%016x/%s", hash(tk.Owner), tk.CreatedAt.UnixNano(), tk.ID),
				"active prefix":   "a/" + hash(tk.Quota()) + "/",
				"active":          "a/" + hash(tk.Quota()) + "/" + tk.ID,
				"finished prefix": "f/" + hash(tk.Quota()) + "/",
				"finished":        fmt.Sprintf("f/%s/%016x/%s", hash(tk.Quota()), tk.ExpiresAt().UnixNano(), tk.ID),
				"expiry":          fmt.Sprintf("e/%016x/%s", tk.ExpiresAt().UnixNano(), tk.ID),
			}
			got := map[string]string{
				"record": string(recordKey(tk.ID)), "header": string(headerKey(tk.ID)), "lease": string(leaseKey(tk.ID)),
				"owner hash": ownerHash(tk.Owner), "owner prefix": string(ownerPrefix(tk.Owner)), "owner": string(ownerKey(tk)),
				"active prefix": string(activePrefix(tk.Quota())), "active": string(activeKey(tk)),
				"finished prefix": string(finishedPrefix(tk.Quota())), "finished": string(finishedKey(tk)),
				"expiry": string(expiryKey(tk)),
			}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s key %q, want %q", k, got[k], w)
				}
			}
		})
	}
}

// Each key of a task is made in one allocation: a create and a completion
// write several.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestKeysAllocs(t *testing.T) {
	tk := &task.Task{ID: "9sle5G8nJypWiKEpw-_TZA", Owner: task.Anonymous, CreatedAt: time.Now(), TTL: time.Hour}
	for name, key := range map[string]func() []byte{
		"record": func() []byte { return recordKey(tk.ID) }, "header": func() []byte { return headerKey(tk.ID) },
		"owner": func() []byte { return ownerKey(tk) }, "active": func() []byte { return activeKey(tk) },
		"finished": func() []byte { return finishedKey(tk) }, "expiry": func() []byte { return expiryKey(tk) },
	} {
		if n := testing.AllocsPerRun(50, func() { _ = key() }); n > 1 {
			t.Errorf("the %s key took %.0f allocations, want 1", name, n)
		}
	}
}
