// Package crbench compares, on one real API server, the same controller on
// controller-runtime's own leader election (with EnableWarmup), on Baton's
// controller-runtime integration, and Baton's bare elector as the baseline of the
// integration's overhead. See BenchmarkControllerRuntime. BenchmarkCrashFailover
// SIGKILLs the leader process of client-go's elector, controller-runtime's manager and
// Baton's integration without and with the death signal, playing the kubelet's report
// of the killed container, and compares the failovers.
package crbench
