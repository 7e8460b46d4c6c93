package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// EncodeRecord gives exactly the bytes (or the failure) of json.Marshal.
func TestEncodeTaskMatchesJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	texts := []string{"", "plain", "with \"quotes\"", "back\\slash", "é ü 世界", "line\nbreak", "<tag>&", "\u2028", "tab\t", "bad \xff utf8", "\x7f"}
	text := func() string { return texts[rng.IntN(len(texts))] }
	raws := []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(`{"a":[1,2,{"b":null}],"s":"x y"}`), json.RawMessage(` { "a" : 1 } `),
		json.RawMessage(`{"h":"<b>&"}`), json.RawMessage(`"\u2028"`), json.RawMessage("\"\u2028\""), json.RawMessage(`{"e":"é"}`), json.RawMessage(`12`)}
	raw := func() json.RawMessage { return raws[rng.IntN(len(raws))] }
	var tasks []*Task
	for range 500 {
		now := time.Date(2026, 1, 2, 3, 4, 5, rng.IntN(1e9), time.UTC)
		if rng.IntN(4) == 0 {
			now = now.In(time.FixedZone("x", 3600*rng.IntN(5)))
		}
		task := &Task{
			ID: NewTaskID(), Owner: text(), Principal: text(), Tenant: text(), Status: Status(text()), StatusMessage: text(),
			CreatedAt: now, UpdatedAt: now.Add(time.Duration(rng.IntN(1e12))), TTL: time.Duration(rng.Int64() - rng.Int64()), PollInterval: time.Duration(rng.IntN(3)),
			Era: Era(text()), Tool: text(), Params: raw(), Session: text(), UpstreamID: raw(), Round: rng.IntN(3) - 1, NextInputKey: rng.IntN(3),
			Result: raw(), IsError: rng.IntN(2) == 0, IdempotencyKey: text(), Fingerprint: text(), Endpoint: text(), Host: text(),
			Route: text(), RequestState: text(), LoadShed: rng.IntN(3),
		}
		if rng.IntN(3) == 0 {
			task.Error = &jsonrpc.Error{Code: -32603, Message: text(), Data: raw()}
		}
		if rng.IntN(3) == 0 {
			task.Inputs = []InputRequest{{Key: "1", Method: text(), Params: raw(), Round: 1, Answered: true}}
		}
		if rng.IntN(3) == 0 {
			task.Lease = Lease{Holder: text(), Expires: now}
			if rng.IntN(3) == 0 {
				task.Lease.Expires = time.Time{}
			}
		}
		for range rng.IntN(4) {
			task.History = append(task.History, StatusChange{From: Status(text()), To: Status(text()), Message: text(), At: now.Add(time.Duration(rng.IntN(1e12)))})
		}
		if n := rng.IntN(4); n > 0 {
			task.Headers = map[string]string{}
			for i := range n {
				task.Headers[fmt.Sprint("H", i, text())] = text()
			}
		}
		tasks = append(tasks, task)
	}
	tasks = append(tasks,
		&Task{}, &Task{Params: json.RawMessage{}}, &Task{Params: json.RawMessage(`{`)}, &Task{Result: json.RawMessage(`nope`)},
		&Task{CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, &Task{Lease: Lease{Expires: time.Time{}.In(time.UTC)}},
		&Task{Inputs: []InputRequest{}}, &Task{Headers: map[string]string{}}, &Task{Error: &jsonrpc.Error{Data: json.RawMessage(`x`)}},
		&Task{History: []StatusChange{}}, &Task{History: []StatusChange{{}}}, &Task{History: []StatusChange{{At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}},
		&Task{Lease: Lease{Holder: "h"}}, &Task{Lease: Lease{Expires: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}},
	)
	for _, task := range tasks {
		want, wantErr := json.Marshal(task)
		got, err := EncodeRecord(task)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%+v: error %v, want %v", task, err, wantErr)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("\n got %s\nwant %s", got, want)
		}
	}
}

// BenchmarkEncodeTask compares the record encoding of every store write
// with json.Marshal, on a record of the size the gateway writes.
func BenchmarkEncodeTask(b *testing.B) {
	bt := benchTask()
	bt.UpstreamID = jsonrpc.UpstreamCallID(bt.ID, 1)
	bt.Endpoint, bt.Host, bt.Headers = "/mcp", "127.0.0.1:8080", map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	bt.Status, bt.Result = StatusCompleted, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	if _, ok := bt.appendJSON(make([]byte, 0, 512)); !ok {
		b.Fatal("a record as the gateway writes it took the slow path")
	}
	for name, encode := range map[string]func(*Task) ([]byte, error){
		"json.Marshal": func(t *Task) ([]byte, error) { return json.Marshal(t) },
		"EncodeRecord": EncodeRecord,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encode(bt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
