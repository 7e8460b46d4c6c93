package jsonx

import "testing"

// The Last functions act on the member decoders read: the last of a name.
func TestLast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, obj string
		path      []string
		wantGet   string
		wantSet   string
	}{
		{"unique", `{"a":1,"b":2}`, []string{"a"}, `1`, `{"a":9,"b":2}`},
		{"duplicate", `{"a":1,"b":2,"a":3}`, []string{"a"}, `3`, `{"a":1,"b":2,"a":9}`},
		{"escaped duplicate", `{"a":1,"\u0061":3}`, []string{"a"}, `3`, `{"a":1,"\u0061":9}`},
		{"absent", `{"b":2}`, []string{"a"}, ``, `{"b":2,"a":9}`},
		{"empty", `{}`, []string{"a"}, ``, `{"a":9}`},
		{"path through the last", `{"c":{"x":1},"c":{"y":2}}`, []string{"c", "x"}, ``, `{"c":{"x":1},"c":{"y":2,"x":9}}`},
		{"path through a non-object", `{"c":[1],"d":0}`, []string{"c", "x"}, ``, `{"c":{"x":9},"d":0}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if len(tt.path) == 1 {
				got, ok := GetLast([]byte(tt.obj), tt.path[0])
				if string(got) != tt.wantGet || ok != (tt.wantGet != "") {
					t.Errorf("GetLast = %s, %v; want %s", got, ok, tt.wantGet)
				}
			}
			set, err := SetPathLast([]byte(tt.obj), tt.path, []byte(`9`))
			if err != nil || string(set) != tt.wantSet {
				t.Errorf("SetPathLast = %s, %v; want %s", set, err, tt.wantSet)
			}
		})
	}
	if _, err := SetLast([]byte(`{"a":`), "a", []byte(`1`)); err == nil {
		t.Error("SetLast accepted a malformed object")
	}
}
