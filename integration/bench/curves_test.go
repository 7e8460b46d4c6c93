package main

import (
	"slices"
	"testing"
)

func TestParseSizes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []int
		ok   bool
	}{
		{"10000,100000,1000000", []int{10000, 100000, 1000000}, true},
		{" 100 , 1000", []int{100, 1000}, true},
		{"7", []int{7}, true},
		{"", nil, false},
		{"100,,1000", nil, false},
		{"0", nil, false},
		{"-5", nil, false},
		{"1k", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseSizes(tc.in)
			if (err == nil) != tc.ok {
				t.Fatalf("parseSizes(%q) error %v, want ok %v", tc.in, err, tc.ok)
			}
			if tc.ok && !slices.Equal(got, tc.want) {
				t.Fatalf("parseSizes(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
