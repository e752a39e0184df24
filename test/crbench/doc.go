// Package crbench compares, on one real API server, the same controller on
// controller-runtime's own leader election (with EnableWarmup), on Baton's
// controller-runtime integration, and Baton's bare elector as the baseline of the
// integration's overhead. See BenchmarkControllerRuntime.
package crbench
