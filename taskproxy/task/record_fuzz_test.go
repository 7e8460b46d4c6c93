package task

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeRecord checks DecodeRecord against json.Unmarshal: whatever it
// accepts decodes to the same task, and a record it writes reads back as
// the task it came from.
func FuzzDecodeRecord(f *testing.F) {
	bt := benchTask()
	bt.Status, bt.Result = StatusCompleted, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	bt.Headers = map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	bt.Inputs = []InputRequest{{Key: "1", Method: "elicitation/create", Params: json.RawMessage(`{"message":"ok?"}`)}}
	seed, _ := EncodeRecord(bt)
	f.Add(seed)
	f.Add([]byte(`{"id":"a","owner":"o","status":"working","created_at":"2026-12-01T00:00:00Z","ttl":60000000000}`))
	f.Add([]byte(`{"id":"a\u0041","owner":"o","status":"failed","error":{"code":-32603,"message":"boom"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var got Task
		if err := DecodeRecord(data, &got); err != nil {
			return
		}
		var want Task
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("DecodeRecord accepted %q, json.Unmarshal refuses it: %v", data, err)
		}
		if !sameTask(got, want) {
			t.Fatalf("record %q:\nDecodeRecord   %+v\njson.Unmarshal %+v", data, got, want)
		}
		again, err := EncodeRecord(&got)
		if err != nil {
			return // a task json.Marshal cannot write either (say, an invalid raw member)
		}
		var back Task
		if err := DecodeRecord(again, &back); err != nil {
			t.Fatalf("EncodeRecord wrote %q, which does not read back: %v", again, err)
		}
		if !sameTask(back, got) {
			t.Fatalf("round trip of %q:\n got %+v\nwant %+v", data, back, got)
		}
	})
}

// sameTask compares tasks as their records do: times by instant, raw members
// by their JSON (an absent one and null alike, as json.Marshal writes both).
func sameTask(a, b Task) bool {
	ja, errA := json.Marshal(normalized(a))
	jb, errB := json.Marshal(normalized(b))
	return errA == nil && errB == nil && reflect.DeepEqual(ja, jb)
}

// normalized puts every time in UTC.
func normalized(t Task) Task {
	for _, tm := range []*time.Time{&t.CreatedAt, &t.UpdatedAt, &t.Lease.Expires} {
		if !tm.IsZero() {
			*tm = tm.UTC()
		}
	}
	return t
}
