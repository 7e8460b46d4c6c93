package jsonx

import "testing"

// An empty path names no member: SetPath says so instead of indexing past
// the path's end (it panicked before).
func TestSetPathEmpty(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path []string
	}{
		{"nil", nil},
		{"empty", []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := SetPath([]byte(`{"a":1}`), tt.path, []byte(`2`))
			if err == nil {
				t.Errorf("SetPath(%v) = %s, want an error", tt.path, got)
			}
		})
	}
}
