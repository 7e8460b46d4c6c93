package task

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// DecodeRecord gives exactly what json.Unmarshal gives, for the records the
// store writes and for anything else a record could hold.
func TestDecodeRecordMatchesJSON(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	text := func() string {
		parts := []string{"", "plain", "with \"quotes\"", "back\\slash", "é ü 世界", "line\nbreak", "<tag>&", "\u2028", "tab\t"}
		return parts[rng.IntN(len(parts))]
	}
	var records []string
	for range 300 {
		now := time.Date(2026, 1, 2, 3, 4, 5, rng.IntN(1e9), time.UTC)
		task := &Task{
			ID: NewTaskID(), Owner: text(), Principal: text(), Tenant: text(), Status: Status(text()), StatusMessage: text(),
			CreatedAt: now, UpdatedAt: now.Add(time.Duration(rng.IntN(1e12))), TTL: time.Duration(rng.Int64()), PollInterval: time.Duration(-rng.IntN(10)),
			Era: Era2025, Tool: text(), Session: text(), Round: rng.IntN(5), NextInputKey: rng.IntN(3), IsError: rng.IntN(2) == 0,
			IdempotencyKey: text(), Fingerprint: text(), Endpoint: text(), Host: text(), Route: text(), RequestState: text(), LoadShed: rng.IntN(3),
		}
		if rng.IntN(3) > 0 {
			task.Params = json.RawMessage(fmt.Sprintf(`{"name":%q,"arguments":{"a":[1,2,{"b":null}]}}`, text()))
		}
		if rng.IntN(2) == 0 {
			task.UpstreamID = jsonrpc.UpstreamCallID(task.ID, 1)
			task.Result = json.RawMessage(`{"content":[{"type":"text","text":"done"}],"isError":false}`)
		}
		if rng.IntN(3) == 0 {
			task.Error = &jsonrpc.Error{Code: -32603, Message: text(), Data: json.RawMessage(`{"x":1}`)}
		}
		if rng.IntN(3) == 0 {
			task.Inputs = []InputRequest{{Key: "1", Method: "elicitation/create", Params: json.RawMessage(`{"m":1}`), Round: 1, Answered: true, Response: json.RawMessage(`{}`)}}
		}
		if rng.IntN(3) == 0 {
			task.Lease = Lease{Holder: text(), Expires: now}
		}
		if n := rng.IntN(4); n > 0 {
			task.Headers = map[string]string{}
			for i := range n {
				task.Headers[fmt.Sprint("H", i, text())] = text()
			}
		}
		data, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		records = append(records, string(data))
		var fast Task
		if !decodeRecordFast(data, &fast) {
			t.Errorf("a record as the store writes it took the slow path: %s", data)
		}
	}
	records = append(records,
		`{}`, `null`, `[]`, `"x"`, ``, `{`, `{"id":"a"`, `{"id":"a",}`, `{"id":"a"} x`,
		`{"id":"a","unknown":1}`, `{"ID":"a"}`, `{"Owner":"b","owner":"c"}`, `{"id":"a","id":"b"}`,
		`{"id":null,"params":null,"result":null,"error":null,"inputs":null,"headers":null,"lease":null,"createdAt":null,"ttl":null,"isError":null}`,
		`{"id":1}`, `{"ttl":"5"}`, `{"ttl":1.5}`, `{"ttl":1e3}`, `{"ttl":-0}`, `{"ttl":99999999999999999999}`, `{"round":-3}`,
		`{"isError":"true"}`, `{"isError":1}`, `{"createdAt":"yesterday"}`, `{"createdAt":5}`,
		`{"headers":{"a":"1"},"headers":{"b":"2"}}`, `{"headers":{"a":"1","a":"2"}}`, `{"headers":{"a":1}}`, `{"headers":{"\u0061":"x\ty"}}`,
		`{"headers":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8","i":"9","j":"10","k":"11","l":"12","m":"13","n":"14","o":"15","p":"16","q":"17"}}`,
		`{"params":{"a":1},"params":[2]}`, `{"lease":{"holder":"h"},"lease":{"expires":"2026-01-01T00:00:00Z"}}`,
		`{"inputs":[{"key":"1"}],"inputs":[]}`, "{\"owner\":\"a\xffb\"}", `{"owner":"\ud800"}`, ` {"id" : "a" , "tool" : "t" } `,
		`{"error":{"code":"x"}}`, `{"status":"completed","result":{"a":[1,{"b":"}"}]}}`,
	)
	for _, data := range records {
		var want Task
		wantErr := json.Unmarshal([]byte(data), &want)
		var got Task
		err := DecodeRecord([]byte(data), &got)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
			t.Errorf("%s: error %v, want %v", data, err, wantErr)
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", data, got, want)
		}
	}
}

// The decoded record owns its bytes: the store's buffer is reused after the
// read.
func TestDecodeRecordCopies(t *testing.T) {
	t.Parallel()
	data := []byte(`{"id":"abc","params":{"a":1},"upstreamId":"u","result":{"r":2},"headers":{"h":"v"}}`)
	var task Task
	if err := DecodeRecord(data, &task); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'x'
	}
	if task.ID != "abc" || string(task.Params) != `{"a":1}` || string(task.UpstreamID) != `"u"` || string(task.Result) != `{"r":2}` || task.Headers["h"] != "v" {
		t.Errorf("the record changed with the buffer: %+v", task)
	}
	if strings.Contains(fmt.Sprint(task), "xxx") {
		t.Error("the record shares the buffer")
	}
}

// BenchmarkDecodeRecord compares the record decoding of every store read
// with json.Unmarshal, on a record of the size the gateway writes.
func BenchmarkDecodeRecord(b *testing.B) {
	bt := benchTask()
	bt.UpstreamID = jsonrpc.UpstreamCallID(bt.ID, 1)
	bt.Endpoint, bt.Host, bt.Headers = "/mcp", "127.0.0.1:8080", map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	bt.Status, bt.Result = StatusCompleted, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	data, err := json.Marshal(bt)
	if err != nil {
		b.Fatal(err)
	}
	for name, decode := range map[string]func([]byte, *Task) error{
		"json.Unmarshal": func(d []byte, t *Task) error { return json.Unmarshal(d, t) },
		"DecodeRecord":   DecodeRecord,
	} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				var t Task
				if err := decode(data, &t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
