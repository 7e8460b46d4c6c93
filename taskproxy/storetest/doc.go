// Package storetest is the test suite every task.Store backend must
// pass: the semantics the gateway relies on, written once against the
// interface, so that the embedded Badger store and the PostgreSQL store
// cannot drift apart. A backend's test calls Run with a function that opens
// a fresh, empty store.
package storetest
