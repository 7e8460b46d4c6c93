package runtime

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/follow"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// Progress as status. A 2026-07-28 task has no stream its client reads
// once the call became a task: the upstream's notifications/progress on
// the call would reach no one, and a client polling tasks/get would see
// nothing move until the end. So the worker writes each one into the task's
// statusMessage, in a short fixed form, at most once per
// progressStatusInterval (the latest one wins; one that arrives sooner
// waits for the interval), and every write wakes the task's
// subscriptions/listen subscribers, which send notifications/tasks.

// progressStatusInterval bounds how often progress rewrites a task's
// status message: each write is a durable store write.
const progressStatusInterval = time.Second

// maxProgressText bounds the part of a status message taken from the
// upstream's progress message.
const maxProgressText = 200

// progressMessage is the status message of a progress notification's
// params: "progress 3/6: Analyzing content", "progress 3: Analyzing
// content", "progress 3/6" or "progress 3". Params whose progress is not a
// JSON number give none.
func progressMessage(params json.RawMessage) (string, bool) {
	progress, ok := jsonx.Get(params, "progress")
	if !ok || !isJSONNumber(progress) {
		return "", false
	}
	msg := "progress " + numberText(progress)
	if total, ok := jsonx.Get(params, "total"); ok && isJSONNumber(total) {
		msg += "/" + numberText(total)
	}
	if raw, ok := jsonx.Get(params, "message"); ok {
		var text string
		if json.Unmarshal(raw, &text) == nil && text != "" {
			msg += ": " + follow.TruncateText(text, maxProgressText)
		}
	}
	return msg, true
}

// isJSONNumber reports whether raw is a JSON number.
func isJSONNumber(raw json.RawMessage) bool {
	var n json.Number
	return len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') && json.Unmarshal(raw, &n) == nil
}

// maxNumberText bounds the spelling of a number in a status message.
const maxNumberText = 32

// numberText spells a progress number: an integral one as its integer (a
// runtime that keeps numbers as floats sends 3.0 of 6.0, shown as 3/6),
// any other as sent, cut to maxNumberText bytes.
func numberText(raw json.RawMessage) string {
	if n, err := jsonx.Int(raw); err == nil {
		return strconv.FormatInt(n, 10)
	}
	return follow.TruncateText(string(raw), maxNumberText)
}

// progressStatus paces the status messages progress writes: one now when
// the last was written at least progressStatusInterval ago, else the latest
// kept until the interval has passed (due fires).
type progressStatus struct {
	last    time.Time
	pending string
	timer   *time.Timer
}

// offer takes a new message at now and returns the one to write now, if any.
func (p *progressStatus) offer(msg string, now time.Time) (string, bool) {
	if wait := progressStatusInterval - now.Sub(p.last); wait > 0 {
		p.pending = msg
		if p.timer == nil {
			p.timer = time.NewTimer(wait)
		}
		return "", false
	}
	p.stop()
	p.last, p.pending = now, ""
	return msg, true
}

// due fires when a kept message may be written; nil when none waits.
func (p *progressStatus) due() <-chan time.Time {
	if p.timer == nil {
		return nil
	}
	return p.timer.C
}

// fire returns the kept message once due has fired.
func (p *progressStatus) fire(now time.Time) (string, bool) {
	p.timer = nil
	if p.pending == "" {
		return "", false
	}
	msg := p.pending
	p.last, p.pending = now, ""
	return msg, true
}

// stop drops the timer.
func (p *progressStatus) stop() {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}
