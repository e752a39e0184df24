// Command baton runs the Baton reference controller.
//
//	baton demo [flags]   several replicas in one process, on in-memory leases,
//	                     put through leader failures with every hand-over checked
//	baton run [flags]    one replica against a Kubernetes cluster
//	baton version        the module version and VCS revision it was built from
//
// Run `baton demo -h` or `baton run -h` for the flags.
//
// # Flags and errors
//
// Every flag is checked before anything starts; a value out of range is
// refused, naming the flag as typed (`--lease-duration 24h0m0s is above
// 1m0s`), and a zero is a value, never "the default". Files the command
// writes (`--timeline`, `--log-file`) are opened before the run.
//
// # Exit codes
//
// 0 success; 1 a check of the demo failed or the controller failed; 2 bad
// flags or setup; 130 the demo was interrupted (SIGINT or SIGTERM): it
// prints the report of the run so far.
//
// # Logging
//
// `--log-level` and `--log-format` (text or json) choose one slog handler;
// slog's default logger and klog (through which client-go logs) both write
// through it.
//
// # Layer
//
// The command is on the reference side: it wires the reference controller
// (pkg/controller/app) and the demo (internal/demo).
package main
