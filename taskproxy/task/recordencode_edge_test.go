package task

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// The hand-written lease and history of a record are
// encoding/json's bytes for awkward values too, and where encoding/json
// fails the hand-written encoder fails alike.
func TestRecordLeaseHistoryMatchJSON(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.FixedZone("", 5*3600+30*60))
	awkward := "a \"q\" <b>&</b> \\ \n\t\u2028\u2029 é \x7f \xff\xfe"
	tests := []struct {
		name string
		edit func(*Task)
	}{
		{"zero lease with a location", func(tk *Task) { tk.Lease = Lease{Expires: time.Time{}.In(time.Local)} }},
		{"lease without holder", func(tk *Task) { tk.Lease = Lease{Expires: t0} }},
		{"lease without expiry", func(tk *Task) { tk.Lease = Lease{Holder: "e1/p1"} }},
		{"lease holder to escape", func(tk *Task) { tk.Lease = Lease{Holder: awkward, Expires: t0} }},
		{"lease in year 0", func(tk *Task) { tk.Lease = Lease{Holder: "h", Expires: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)} }},
		{"lease in year 9999", func(tk *Task) {
			tk.Lease = Lease{Holder: "h", Expires: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}
		}},
		{"lease in year 10000", func(tk *Task) { tk.Lease = Lease{Holder: "h", Expires: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)} }},
		{"lease in year -1", func(tk *Task) { tk.Lease = Lease{Holder: "h", Expires: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} }},
		{"lease with monotonic clock", func(tk *Task) { tk.Lease = Lease{Holder: "h", Expires: time.Now()} }},
		{"history zero times", func(tk *Task) { tk.History = []StatusChange{{From: StatusWorking, To: StatusCompleted}} }},
		{"history to escape", func(tk *Task) {
			tk.History = []StatusChange{{From: Status(awkward), To: StatusFailed, Message: awkward, At: t0}, {From: "", To: "", At: t0.In(time.Local)}}
		}},
		{"history in year 10000", func(tk *Task) {
			tk.History = []StatusChange{{From: StatusWorking, To: StatusFailed, At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}}
		}},
		{"empty non-nil history", func(tk *Task) { tk.History = []StatusChange{} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tk := &Task{ID: "x", Owner: "o", Status: StatusWorking, CreatedAt: t0, UpdatedAt: t0, Tool: "t", Params: json.RawMessage(`{}`)}
			tt.edit(tk)
			want, wantErr := json.Marshal(tk)
			got, gotErr := EncodeRecord(tk)
			if (wantErr == nil) != (gotErr == nil) || !bytes.Equal(got, want) {
				t.Errorf("EncodeRecord = %s, %v\nwant           %s, %v", got, gotErr, want, wantErr)
			}
		})
	}
}
