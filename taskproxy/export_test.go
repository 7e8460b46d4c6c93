package taskproxy

import "testing"

// OpenTestStore opens a real store for the core's tests: in memory when dir
// is empty, else on disk in dir, closed when the test ends. The core knows
// no backend, so store_link_test.go (package taskproxy_test, which may
// import a backend that imports this package) sets it to a Badger store.
var OpenTestStore func(tb testing.TB, dir string, syncWrites bool) Store
