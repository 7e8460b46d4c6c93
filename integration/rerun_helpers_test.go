package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// The status messages of a retry_on_restart task's re-run, in part: after
// the gateway restarted, or after another replica took it over.
const (
	rerunAfterRestart  = "re-running the call after a gateway restart"
	rerunAfterTakeover = "re-running the call after the gateway replica running it stopped"
)

// rerunCompleted checks, through the admin API at adminAddr, that task id
// completed with no status message, as a task that ran once does, and that
// its history keeps the re-run: a change to working with a message that
// begins with why.
func rerunCompleted(t testing.TB, adminAddr, id, why string) error {
	t.Helper()
	var v struct {
		Status        string `json:"status"`
		StatusMessage string `json:"status_message"`
		History       []struct {
			From    string `json:"from"`
			To      string `json:"to"`
			Message string `json:"message"`
		} `json:"history"`
	}
	if code, body := adminDo(t, adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v); code != http.StatusOK {
		return fmt.Errorf("admin API on task %s: HTTP %d %s", id, code, body)
	}
	rerun := false
	for _, h := range v.History {
		rerun = rerun || h.To == "working" && strings.HasPrefix(h.Message, why)
	}
	if v.Status != "completed" || v.StatusMessage != "" || !rerun {
		return fmt.Errorf("task %s ended %s %q with history %+v, want completed without a status message, the history keeping %q",
			id, v.Status, v.StatusMessage, v.History, why)
	}
	return nil
}
