package runtime

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A reload provisions a route of the same name: tasks that wait from then
// on must wait for a request of the new configuration, not take the base
// an earlier one filled (its next handler is that configuration's
// reverse_proxy, cleaned up with it); a base still waiting is shared.
func TestRouteBaseAcrossConfigurations(t *testing.T) {
	t.Parallel()
	fill := func(b *routeBase, next http.Handler) {
		b.once.Do(func() {
			b.base = &servedRequest{r: httptest.NewRequest(http.MethodPost, "/mcp", nil), next: next}
			close(b.ready)
		})
	}
	oldNext := http.NotFoundHandler()
	tests := []struct {
		name      string
		filled    bool // the first configuration served a base before the reload
		wantFresh bool
	}{
		{"filled by the first configuration", true, true},
		{"still waiting", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rs := newRouteTable()
			first := &Route{cfg: RouteConfig{Name: "srv0#0"}}
			rs.add(first)
			if tt.filled {
				fill(first.base, oldNext)
			}
			second := &Route{cfg: RouteConfig{Name: "srv0#0"}}
			rs.add(second)
			if fresh := second.base != first.base; fresh != tt.wantFresh {
				t.Fatalf("the second configuration's base is fresh: %v, want %v", fresh, tt.wantFresh)
			}
			if got := rs.base("srv0#0"); got != second.base {
				t.Errorf("tasks that wait now wait on %p, want the second configuration's base %p", got, second.base)
			}
			if tt.wantFresh && second.base.filled() {
				t.Error("the fresh base is filled before the second configuration served a request")
			}
		})
	}
}
