// Package components holds kustomize Components that put a kubebuilder
// (project-v4) project's controller on Baton, and the tests that render them
// into a scaffold-shaped project's config/ and check the result, on paper and
// on a real API server.
//
// # Components
//
//	baton/        the manager's Deployment with three replicas, the death
//	              signal's Downward-API environment, a terminationGracePeriodSeconds
//	              above the Runtime's shutdown timeout, the elections' Role and
//	              RoleBinding (Leases incl. delete, pods list and watch, Events),
//	              and a PodDisruptionBudget
//	baton-fence/  optional: the API server's fence of the controller's writes
//	              (controllerruntime.NewAdmissionFence's policy and binding),
//	              generated for the sample project: regenerate it for yours
//
// A project adds a Component to config/default/kustomization.yaml under
// components:, as testdata/project/config/default does; docs/MIGRATING.md
// lists the rest of a migration.
package components
