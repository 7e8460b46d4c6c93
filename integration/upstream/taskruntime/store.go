package taskruntime

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// stateFile is the JSON document the runtime keeps its tasks in.
type stateFile struct {
	Tasks []*record `json:"tasks"`
	// Expired maps the ids of tasks removed at the end of their TTL to the
	// owner they had, so that tasks/get can say "expired" rather than "not
	// found" (to that owner only).
	Expired map[string]tombstone `json:"expired,omitempty"`
}

// tombstone remembers an expired task until Until.
type tombstone struct {
	Owner string    `json:"owner,omitempty"`
	Until time.Time `json:"until"`
}

// newTaskID returns 128 random bits, URL-safe: task ids act as bearer
// tokens, so they must not be guessable.
func newTaskID() string {
	b := make([]byte, 16)
	rand.Read(b) // crypto/rand.Read never returns an error.
	return base64.RawURLEncoding.EncodeToString(b)
}

// ownerOf derives the caller a task is bound to from the binding header.
// Only a hash is kept, so the state file holds no credentials.
func (s *Server) ownerOf(r *http.Request) string {
	if s.bindHeader == "" {
		return ""
	}
	v := r.Header.Get(s.bindHeader)
	if v == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// lookup finds the caller's task. A task of another caller answers exactly
// like one that never existed, so that task ids leak nothing. Called with
// s.mu held.
func (s *Server) lookup(owner, id string) (*record, *rpcError) {
	t, ok := s.tasks[id]
	if ok && t.Owner == owner {
		return t, nil
	}
	if ok {
		s.obs.foreign++
	} else if ts, gone := s.expired[id]; gone && ts.Owner == owner {
		return nil, inBandError(CodeInvalidParams, taskExpiredMessage)
	}
	return nil, inBandError(CodeInvalidParams, taskNotFoundMessage)
}

// changedLocked records a change to t: it stamps lastUpdatedAt, writes the
// state file and wakes every waiter. Called with s.mu held.
func (s *Server) changedLocked(t *record) {
	if t != nil {
		t.UpdatedAt = s.now()
	}
	if err := s.saveLocked(); err != nil {
		s.logger.Error("saving task state", "file", s.stateFile, "error", err)
	}
	s.wakeLocked()
}

// wakeLocked wakes every waiter (work and observers) to re-check. Called
// with s.mu held.
func (s *Server) wakeLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// sweepLocked applies TTLs. A finished task whose TTL has run out is
// removed (a tombstone remembers it for one more TTL). An unfinished one
// is failed instead, as the extension allows, and its ttlMs is extended by
// one TTL so that the client can still read why. Called with s.mu held.
func (s *Server) sweepLocked() {
	now := s.now()
	dirty := false
	for id, t := range s.tasks {
		end := t.expiresAt()
		if end.IsZero() || now.Before(end) {
			continue
		}
		if !t.Status.Terminal() {
			t.Status, t.Held = StatusFailed, false
			t.Outstanding = nil
			t.StatusMessage = "Task expired before it finished"
			t.Error = &rpcError{Code: CodeInternalError, Message: fmt.Sprintf("task expired: ttlMs %d elapsed before it finished", *t.TTLMs)}
			extended := now.Sub(t.CreatedAt).Milliseconds() + *t.TTLMs
			t.TTLMs = &extended
			t.UpdatedAt = now
			if stop := s.stops[id]; stop != nil {
				stop(errExpired)
			}
			dirty = true
			continue
		}
		delete(s.tasks, id)
		s.expired[id] = tombstone{Owner: t.Owner, Until: now.Add(time.Duration(*t.TTLMs) * time.Millisecond)}
		dirty = true
	}
	for id, ts := range s.expired {
		if !now.Before(ts.Until) {
			delete(s.expired, id)
			dirty = true
		}
	}
	if dirty {
		s.changedLocked(nil)
	}
}

// saveLocked writes the state file atomically (temporary file, then
// rename), so that a SIGKILL leaves either the old or the new state. No
// fsync: surviving the process, not the machine, is what it is for.
func (s *Server) saveLocked() error {
	if s.stateFile == "" {
		return nil
	}
	st := stateFile{Expired: s.expired}
	for _, id := range s.order {
		if t, ok := s.tasks[id]; ok {
			st.Tasks = append(st.Tasks, t)
		}
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encoding task state: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.stateFile), filepath.Base(s.stateFile)+".tmp-*")
	if err != nil {
		return fmt.Errorf("creating temporary state file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), s.stateFile); err != nil {
		return fmt.Errorf("replacing %s: %w", s.stateFile, err)
	}
	return nil
}

// load reads the state file, if there is one.
func (s *Server) load() error {
	if s.stateFile == "" {
		return nil
	}
	b, err := os.ReadFile(s.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading task state: %w", err)
	}
	var st stateFile
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("decoding task state %s: %w", s.stateFile, err)
	}
	for _, t := range st.Tasks {
		if _, ok := s.tools[t.Tool]; !ok {
			return fmt.Errorf("task state %s: task %s names unknown tool %q", s.stateFile, t.ID, t.Tool)
		}
		s.tasks[t.ID] = t
		s.order = append(s.order, t.ID)
	}
	maps.Copy(s.expired, st.Expired)
	return nil
}
