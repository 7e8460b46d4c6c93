package wire

import "testing"

// Anonymous callers are told apart by address; an IPv6 host that rotates
// through its /64 stays one caller, to the rate limit and to the quotas.
func TestAddressKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ ip, want string }{
		{"127.0.0.1", "ip:127.0.0.1"},
		{"203.0.113.7", "ip:203.0.113.7"},
		{"::ffff:203.0.113.7", "ip:203.0.113.7"},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", "ip:2001:db8:1:2::/64"},
		{"2001:db8:1:2::1", "ip:2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "ip:2001:db8:1:3::/64"},
		{"fe80::1%eth0", "ip:fe80::/64"},
		{"::1", "ip:::/64"},
		{"not an address", "ip:not an address"},
		{"", "ip:"},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			t.Parallel()
			if got := AddressKey(tt.ip); got != tt.want {
				t.Errorf("AddressKey(%q) = %q, want %q", tt.ip, got, tt.want)
			}
		})
	}
}
