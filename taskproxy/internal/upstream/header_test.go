package upstream

import "testing"

func TestEncodeHeaderValue(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"abc-123_XYZ", "abc-123_XYZ"},
		{"tâche", "=?base64?dMOiY2hl?="},
		{" padded", "=?base64?IHBhZGRlZA==?="},
		{"line\nbreak", "=?base64?bGluZQpicmVhaw==?="},
		{"=?base64?YQ==?=", "=?base64?PT9iYXNlNjQ/WVE9PT89?="},
	}
	for _, tt := range tests {
		if got := EncodeHeaderValue(tt.in); got != tt.want {
			t.Errorf("EncodeHeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
