// Package chaos tests the elector (pkg/k8s/leaderelection) with seeded random fault
// histories and a checker over each history. It has no code outside its tests.
package chaos
