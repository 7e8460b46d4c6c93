package follow

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
)

// CreateGrace bounds how long a worker keeps reading the CreateTaskResult
// of a task that ended before it came.
const CreateGrace = 30 * time.Second

// CancelLateV2026Create reads the rest of a, a tools/call declaring the
// extension whose client left before the answer (a plain client's call
// that the gateway made a task call of), for at most CreateGrace, after
// which stop closes it; the upstream task a CreateTaskResult names is
// cancelled, since nobody waits for it now. It returns once done.
func CancelLateV2026Create(log *zap.Logger, a *upstream.Attempt, stop context.CancelFunc, base *http.Request, next http.Handler, callParams json.RawMessage) {
	grace := time.AfterFunc(CreateGrace, stop)
	defer grace.Stop()
	defer stop()
	ev, _ := a.Until(context.Background(), nil, nil)
	if ev.Final == nil {
		log.Warn("the upstream did not answer a call its client left; a task it made for it is not cancelled",
			zap.Duration("grace", CreateGrace), zap.Error(ev.Err))
		return
	}
	created, ok := ReadV2026Created(ev.Final.Result)
	if !ok || ev.Final.Error != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(base.Context()), 10*time.Second)
	defer cancel()
	answer, err := v2026UpstreamRequest(ctx, base, next, callParams, inlineID(created.TaskID, "cancel", 1), "tasks/cancel", map[string]any{"taskId": created.TaskID})
	switch {
	case err != nil:
		log.Warn("cancelling the upstream's task of a call its client left", zap.String("upstream_task", created.TaskID), zap.Error(err))
	case answer.Error != nil: // it ended meanwhile, most likely
		if ce := log.Check(zap.DebugLevel, "upstream refused tasks/cancel"); ce != nil {
			ce.Write(zap.String("upstream_task", created.TaskID), zap.String("error", answer.Error.Message))
		}
	}
}
