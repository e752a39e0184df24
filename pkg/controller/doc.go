// Package controller holds no code of its own: it is the directory of a
// Baton controller's packages, which come in two layers.
//
// # The core
//
// A library for any controller that runs several replicas, of which one
// leads. It never imports the reference controller (internal/layout's test
// enforces it):
//
//   - leadership: StateReplayer, which hands the state the all-replica side
//     published to a new leader's components, and the leadership events;
//   - leaderelection: the adapter that runs the elector of
//     pkg/k8s/leaderelection and publishes its terms as leadership events;
//   - lifecycle: the runtime, which runs all-replica components for the life
//     of the process and leader-only components once per term, and orders a
//     new leader's start so that replayed state reaches its subscriptions;
//   - metrics: Prometheus metrics and health checks of the bus, the election
//     and the runtime (its subpackage reference is the reference
//     controller's own).
//
// The bus (pkg/events), the election (pkg/k8s/leaderelection), the term in
// a context (pkg/termctx), the per-term runner of leader-only work
// (pkg/termrun), the fence every writer stamps and checks
// (pkg/fence) and the controller-runtime integration
// (pkg/integration/controllerruntime) are core packages outside this
// directory.
//
// # The reference controller
//
// A complete controller built on the core, which renders an HAProxy
// configuration and publishes it, as an example to copy and for the demo
// and the command (cmd/baton):
//
//   - config: the configuration documents and their validation;
//   - configchange: the all-replica handler that reads and validates them;
//   - discovery: the all-replica discovery of the HAProxy pods;
//   - pipeline: rendering and validation of the HAProxy configuration;
//   - reconciler: the all-replica trigger and the leader-only Coordinator
//     that runs the pipeline;
//   - configpublisher: the leader-only component that writes the result;
//   - deploymentscheduler: the leader-only component that schedules
//     deployments to the pods;
//   - store: where the published configuration is kept;
//   - events: the reference controller's event catalog (it re-exports the
//     core's leadership and lifecycle events);
//   - app: one replica wired from all of the above.
//
// LEADER_ONLY_COMPONENTS.md lists the leader-only components and the
// contract each keeps.
package controller
