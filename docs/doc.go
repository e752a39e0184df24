// Package docs holds the project's guides; its test builds every Go code block in
// them (and the README's Quick Start) and runs the guide's programs as the guide says,
// three replicas each on a real API server, so that the guides cannot drift from the
// API or from what the programs do.
package docs
