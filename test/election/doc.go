// Package election holds the integration tests and the failover benchmark of
// pkg/k8s/leaderelection against a real kube-apiserver and etcd
// (pkg/batontest). It has no code of its own outside its tests.
//
// # Running
//
// hack/test.sh runs the tests with everything else. To run this package alone:
//
//	export KUBEBUILDER_ASSETS=$(hack/testenv.sh | tail -n 1)
//	go test -race -count=1 ./test/election/
//
// The benchmark compares Baton's elector with client-go's stock one (see
// BenchmarkFailover in failover_bench_test.go for its command and knobs).
// TestHandOverRealAPIServer logs the median and maximum time of a planned
// Elector.HandOver (go test -v -run TestHandOverRealAPIServer ./test/election/,
// BATON_HANDOVER_ROUNDS rounds, default 20).
//
// # Mixed with client-go
//
// interop_test.go runs Baton and client-go electors on one Lease under faults: a
// client-go leader cut off from the API server (with ReleaseOnCancel it keeps its
// leader context for RetryPeriod + 2 × RenewDeadline), a Baton leader cut off
// under a client-go follower (which sees renews at whole-second granularity),
// and client-go's release clearing a lease a Baton leader holds; the monitor
// proves that no two leaderships overlapped.
//
// # Answers that come late
//
// overtaken_test.go holds an acquiring create's answer in the candidate's transport
// while the Lease is deleted by hand and a cold-starting candidate creates it again:
// the first candidate must read the watch events that came meanwhile and start no term
// (a finding of test/chaos on the real API server).
//
// # Candidates
//
// A candidate is an elector under test: in the test process (Baton's, or
// client-go's tools/leaderelection with a resourcelock.LeaseLock), or in a
// subprocess, which re-executes the test binary. TestMain sees the
// BATON_ELECTION_CANDIDATE environment variable (a JSON candidateConfig) and
// runs candidateMain instead of the tests. The subprocess writes one JSON
// object per line on stdout: what it believes (leading, still, ended), its
// callbacks (became-leader, stopped, new-leader), every successful write of the
// lease (write, with send and answer times), a gap in its own loop (gap, for
// SIGSTOP) and exit. It shuts down, releasing if configured, on SIGTERM or when
// its stdin closes.
//
// # Safety monitor
//
// Every test runs a monitor that asserts no two candidates, and no two terms,
// are ever believed to lead at once. Times are CLOCK_MONOTONIC readings, which
// are one clock for all processes of the host and are not moved by wall-clock
// changes, so a subprocess's reports and the test process's observations lie
// on one time line. A candidate's belief in one term is one interval (a term
// never resumes once it ended, which the monitor also checks), so from
// observations "leading" at call windows [b1, a1] ... [bn, an] the monitor
// knows the belief certainly held over [a1, bn]; an overlap of two such
// certain intervals is a proven violation, never a false alarm of scheduling
// delays. In-process candidates are sampled every millisecond or so
// (IsLeader, Term and the term context), subprocesses sample themselves the
// same way. The monitor also checks, against the lease's own write history
// recorded through a watch, that each Baton term is the resourceVersion of a
// write of that candidate that acquired the lease, and that terms grow in the
// order the terms were held.
package election
