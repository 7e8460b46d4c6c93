package taskruntime

import (
	"maps"
	"net/http"
	"strconv"
	"strings"
)

// ControlHandler serves the observer API over HTTP, for tests that run the
// runtime as a separate process (see integration/cmd/taskruntime-upstream).
// Paths are relative to where it is mounted (strip the prefix first):
//
//	GET  /tasks?tool=T      → [TaskView…] of tool T (all tools without T), oldest first
//	GET  /tasks/ID          → TaskView, or 404
//	GET  /counts?tool=T     → {"calls","tasksCreated","cancelRequests"} for T, plus
//	                          {"requests": {method: n}, "rejections": {code: n}, "foreignLookups"}
//	POST /hold?tool=T&step=K → like [Server.Hold]
//	POST /unhold?tool=T     → like [Server.Unhold]
//	POST /release?task=ID   → like [Server.Release]; ?tool=T → [Server.ReleaseAll]
//
// It has no authentication: mount it only on loopback test listeners.
func (s *Server) ControlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /tasks", func(w http.ResponseWriter, r *http.Request) {
		views := []TaskView{}
		for _, id := range s.TaskIDs(r.URL.Query().Get("tool")) {
			if v, ok := s.Task(id); ok {
				views = append(views, v)
			}
		}
		writeJSON(w, http.StatusOK, views)
	})
	mux.HandleFunc("GET /tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		v, ok := s.Task(r.PathValue("id"))
		if !ok {
			http.Error(w, "no such task", http.StatusNotFound)
			return
		}
		writeJSON(w, http.StatusOK, v)
	})
	mux.HandleFunc("GET /counts", func(w http.ResponseWriter, r *http.Request) {
		tool := r.URL.Query().Get("tool")
		s.mu.Lock()
		out := map[string]any{
			"calls": s.obs.calls[tool], "tasksCreated": s.obs.created[tool], "cancelRequests": s.obs.cancels[tool],
			"requests": copyMap(s.obs.requests), "foreignLookups": s.obs.foreign,
		}
		rej := map[string]int{}
		for code, n := range s.obs.rejections {
			rej[strconv.Itoa(code)] = n
		}
		out["rejections"] = rej
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, out)
	})
	mux.HandleFunc("POST /hold", func(w http.ResponseWriter, r *http.Request) {
		step, err := strconv.Atoi(r.URL.Query().Get("step"))
		tool := r.URL.Query().Get("tool")
		if err != nil || step < 1 || tool == "" {
			http.Error(w, "hold needs tool and step ≥ 1", http.StatusBadRequest)
			return
		}
		s.Hold(tool, step)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /unhold", func(w http.ResponseWriter, r *http.Request) {
		s.Unhold(r.URL.Query().Get("tool"))
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /release", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if id := q.Get("task"); id != "" {
			if err := s.Release(id); err != nil {
				http.Error(w, err.Error(), http.StatusNotFound)
				return
			}
		} else {
			s.ReleaseAll(strings.TrimSpace(q.Get("tool")))
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

func copyMap(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	maps.Copy(out, m)
	return out
}
