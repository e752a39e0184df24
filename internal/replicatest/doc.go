// Package replicatest holds helpers for tests that run several replicas of a controller
// in one process against a real API server (internal/testenv): a switchable network
// partition of one client, polling for a condition, and a monitor that checks that the
// term stamps written on objects never go backwards.
//
// # Concurrency properties
//
// Partition and Monitor are safe for concurrent use; Monitor's watch runs in a
// goroutine of its own that ends with the test (t.Cleanup waits for it).
package replicatest
