// Package docs holds the project's guides; its test compiles every Go code block in
// them, so that the guides cannot drift from the API.
package docs
