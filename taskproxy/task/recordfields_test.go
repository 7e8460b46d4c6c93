package task

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// The hand-written record encoder and decoder must know every field of
// Task: a field they missed would be silently dropped from every stored
// record (the encoder) or send every record down the slow path (the
// decoder). This test fills each field in turn with a non-zero value found
// by reflection, so a field added to Task later fails it until both know it.
func TestRecordCodecKnowsEveryField(t *testing.T) {
	t.Parallel()
	typ := reflect.TypeFor[Task]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			t.Parallel()
			var task Task
			setNonZero(t, reflect.ValueOf(&task).Elem().Field(i))
			want, err := json.Marshal(&task)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := task.appendJSON(make([]byte, 0, 512))
			if !ok {
				t.Fatalf("the encoder took the slow path for %s", f.Name)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("encoder drops or misencodes %s:\n got %s\nwant %s", f.Name, got, want)
			}
			var decoded Task
			if !decodeRecordFast(want, &decoded) {
				t.Fatalf("the decoder does not know %s (slow path): %s", f.Name, want)
			}
			var viaJSON Task
			if err := json.Unmarshal(want, &viaJSON); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(decoded, viaJSON) {
				t.Fatalf("decoder gives %+v, json.Unmarshal %+v", decoded, viaJSON)
			}
		})
	}
}

// setNonZero gives v a simple non-zero value of its type.
func setNonZero(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Interface().(type) {
	case time.Time:
		v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)))
		return
	case json.RawMessage:
		v.Set(reflect.ValueOf(json.RawMessage(`{"k":"v"}`)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		setNonZero(t, p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		setNonZero(t, s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		setNonZero(t, k)
		setNonZero(t, e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				setNonZero(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("setNonZero: no value for kind %s (%s)", v.Kind(), v.Type())
	}
}
