package runtime

import (
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func TestViewCacheUnit(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	finished := func(owner string) *task.Task {
		tk := testTask(owner, now)
		tk.Status = task.StatusCompleted
		return tk
	}
	view := []byte(`{"taskId":"x"}`)
	tests := []struct {
		name      string
		put       *task.Task
		owner     string
		at        time.Time
		wantHit   bool
		wantCount int
	}{
		{"owner, before expiry", finished("alice"), "alice", now.Add(time.Minute), true, 1},
		{"another owner", finished("alice"), "bob", now.Add(time.Minute), false, 1},
		{"an owner that is a prefix", finished("alice"), "ali", now.Add(time.Minute), false, 1},
		{"just before the margin", finished("alice"), "alice", now.Add(time.Hour - ViewExpiryMargin - time.Millisecond), true, 1},
		{"within the margin before the end of the ttl", finished("alice"), "alice", now.Add(time.Hour - ViewExpiryMargin), false, 0},
		{"at the end of the ttl", finished("alice"), "alice", now.Add(time.Hour), false, 0},
		{"after the end of the ttl", finished("alice"), "alice", now.Add(2 * time.Hour), false, 0},
		{"still working", testTask("alice", now), "alice", now.Add(time.Minute), false, 0},
		{"input required", func() *task.Task { t := testTask("alice", now); t.Status = task.StatusInputRequired; return t }(), "alice", now.Add(time.Minute), false, 0},
		{"too large", func() *task.Task { t := finished("alice"); t.Tool = strings.Repeat("t", maxCachedEntry); return t }(), "alice", now.Add(time.Minute), false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var vc viewCache
			vc.put(tt.put, WireV2025, view, now)
			got, v, ok := vc.lookup(tt.owner, []byte(tt.put.ID), WireV2025, tt.at)
			if ok != tt.wantHit {
				t.Fatalf("hit = %v, want %v", ok, tt.wantHit)
			}
			if ok && (got.owner.Value() != tt.owner || string(v) != string(view)) {
				t.Errorf("served %+v, %s", got, v)
			}
			if len(vc.entries) != tt.wantCount {
				t.Errorf("%d entries left, want %d", len(vc.entries), tt.wantCount)
			}
			if _, v, _ := vc.lookup(tt.put.Owner, []byte(tt.put.ID), WireV2026, now); v != nil {
				t.Errorf("the 2025-11-25 view served as the 2026-07-28 one: %s", v)
			}
		})
	}
}

// The cache stays within its bytes, evicting the least recently used.
func TestViewCacheBound(t *testing.T) {
	t.Parallel()
	now := time.Now()
	vc := viewCache{max: 20 * viewEntryOverhead}
	var ids []string
	for i := range 100 {
		tk := testTask("alice", now)
		tk.Status = task.StatusCompleted
		vc.put(tk, WireV2025, []byte(`{}`), now)
		ids = append(ids, tk.ID)
		if i >= 1 {
			vc.lookup("alice", []byte(ids[0]), WireV2025, now) // keeps the first one recent
		}
		if vc.bytes > vc.max {
			t.Fatalf("after %d puts: %d bytes, limit %d", i+1, vc.bytes, vc.max)
		}
	}
	if _, _, ok := vc.lookup("alice", []byte(ids[0]), WireV2025, now); !ok {
		t.Error("the most recently read entry was evicted")
	}
	if _, _, ok := vc.lookup("alice", []byte(ids[1]), WireV2025, now); ok {
		t.Error("an old entry survived")
	}
	total := 0
	for _, e := range vc.entries {
		total += int(e.size)
	}
	if total != vc.bytes {
		t.Errorf("accounted %d bytes, entries hold %d", vc.bytes, total)
	}
}

// Eviction spares an entry read since it last came round once: with
// every entry read, the oldest goes; with some read, the oldest unread
// one goes first; the entry just put never does, and the cache ends
// within its bytes.
func TestViewCacheSecondChance(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name    string
		read    []int // entries read before the sixth is put
		evicted int
	}{
		{"none read", nil, 0},
		{"all read", []int{0, 1, 2, 3, 4}, 0},
		{"the oldest read", []int{0}, 1},
		{"all but the third read", []int{0, 1, 3, 4}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vc := viewCache{max: 5 * (viewEntryOverhead + 32)}
			var ids []string
			put := func() {
				tk := testTask("alice", now)
				tk.Status = task.StatusCompleted
				vc.put(tk, WireV2025, []byte(`{}`), now)
				ids = append(ids, tk.ID)
			}
			for range 5 {
				put()
			}
			if len(vc.entries) != 5 {
				t.Fatalf("%d entries cached of 5, room for 5", len(vc.entries))
			}
			for _, i := range tc.read {
				if _, _, ok := vc.lookup("alice", []byte(ids[i]), WireV2025, now); !ok {
					t.Fatalf("entry %d is not cached", i)
				}
			}
			put()
			if vc.bytes > vc.max {
				t.Errorf("%d bytes cached, limit %d", vc.bytes, vc.max)
			}
			for i, id := range ids {
				_, _, ok := vc.lookup("alice", []byte(id), WireV2025, now)
				if want := i != tc.evicted; ok != want {
					t.Errorf("entry %d: cached %v, want %v", i, ok, want)
				}
			}
		})
	}
}

// Entries of one owner share one copy of the owner's name, however many
// copies their records were decoded with: every hit reads it.
func TestViewCacheInternsOwners(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var vc viewCache
	var ids []string
	for range 3 {
		tk := testTask(string([]byte("alice")), now) // a copy of its own, as decoded from a record
		tk.Status = task.StatusCompleted
		vc.put(tk, WireV2025, []byte(`{}`), now)
		ids = append(ids, tk.ID)
		// A collection between puts, as one comes at any time: the
		// interned name must outlive it.
		runtime.GC()
	}
	first, _, ok := vc.lookup("alice", []byte(ids[0]), WireV2025, now)
	if !ok {
		t.Fatal("the entry is not cached")
	}
	for _, id := range ids[1:] {
		e, _, ok := vc.lookup(string([]byte("alice")), []byte(id), WireV2025, now)
		if !ok {
			t.Fatal("the entry is not cached")
		}
		if unsafe.StringData(e.owner.Value()) != unsafe.StringData(first.owner.Value()) { //nolint:gosec // compares where the bytes are, reads nothing
			t.Errorf("entries of one owner hold copies of its name of their own")
		}
	}
}

// The map holds task ids in its own memory, up to maxKeyLen bytes (the
// gateway's ids have 22): a longer id is not cached, and its task is read
// from the store as any other missing one; forgetting it is a no-op.
func TestViewCacheKeys(t *testing.T) {
	t.Parallel()
	now := time.Now()
	var vc viewCache
	for _, n := range []int{1, 22, maxKeyLen, maxKeyLen + 1, 64} {
		tk := testTask("alice", now)
		tk.ID, tk.Status = strings.Repeat("k", n-1)+"x", task.StatusCompleted
		vc.put(tk, WireV2025, []byte(`{}`), now)
		_, _, ok := vc.lookup("alice", []byte(tk.ID), WireV2025, now)
		if want := n <= maxKeyLen; ok != want {
			t.Errorf("an id of %d bytes: cached %v, want %v", n, ok, want)
		}
		if _, _, ok := vc.lookup("alice", []byte(tk.ID[:n-1]+"y"), WireV2025, now); ok {
			t.Errorf("an id of %d bytes: another id of its length hits", n)
		}
		vc.forget(tk.ID)
		if _, _, ok := vc.lookup("alice", []byte(tk.ID), WireV2025, now); ok {
			t.Errorf("an id of %d bytes: still cached after forget", n)
		}
	}
	if len(vc.entries) != 0 || vc.bytes != 0 {
		t.Errorf("%d entries, %d bytes left", len(vc.entries), vc.bytes)
	}
}

// What a hit reads of an entry (its expiry, owner, views, list links, read
// mark and used mark) lies in its first 128 bytes, two cache lines, and the entry
// fills its size class of 192 bytes, whose objects start on a line.
func TestViewEntryLayout(t *testing.T) {
	t.Parallel()
	var e viewEntry
	// Go's size classes around it are 176, 192 and 208 bytes.
	if size := unsafe.Sizeof(e); size <= 176 || size > 192 {
		t.Errorf("an entry has %d bytes, want 177 to 192 (allocated in the size class of 192, aligned on cache lines)", size)
	}
	for name, end := range map[string]uintptr{
		"expires": unsafe.Offsetof(e.expires) + unsafe.Sizeof(e.expires),
		"owner":   unsafe.Offsetof(e.owner) + unsafe.Sizeof(e.owner),
		"views":   unsafe.Offsetof(e.views) + unsafe.Sizeof(e.views),
		"next":    unsafe.Offsetof(e.next) + unsafe.Sizeof(e.next),
		"read":    unsafe.Offsetof(e.read) + unsafe.Sizeof(e.read),
		"used":    unsafe.Offsetof(e.used) + unsafe.Sizeof(e.used),
	} {
		if end > 128 {
			t.Errorf("a hit reads %s, which ends at byte %d of the entry, past its first two cache lines", name, end)
		}
	}
}

func testTask(owner string, created time.Time) *task.Task {
	return &task.Task{ID: task.NewTaskID(), Owner: owner, Status: task.StatusWorking, CreatedAt: created, UpdatedAt: created, TTL: time.Hour, Tool: "t"}
}
