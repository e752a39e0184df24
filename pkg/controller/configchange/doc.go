// Package configchange is the all-replica ConfigChangeHandler: it reads the
// controller's configuration from a Source, validates it, publishes the
// outcome on the event bus, and keeps the last outcome for a new leader.
//
// # Usage
//
//	src, _ := configchange.ConfigMap(clientset, "baton", "baton-config", "config.yaml")
//	h, _ := configchange.New(bus, configchange.Options{Source: src, Logger: logger})
//	m.AddAllReplica(h)
//	m.AddReplayer("config", h.Replayer())
//
// Sources: Default (the built-in configuration of package config), Static
// (a fixed document), File (a file polled by modification time) and
// ConfigMap (one key of one ConfigMap, through a client-go informer).
// Update pushes a document by hand, for embedded mode and demos.
//
// # Outcomes
//
// A document that loads (package config: parse, defaults, validate) is
// published as events.ConfigValidatedEvent with its content version and
// cached in a leadership.StateReplayer. Any other document (unparsable,
// failing validation, or not readable from its source: a missing file, a
// deleted ConfigMap, a missing key) is published as events.ConfigInvalidEvent
// whose errors name the offending field, logged at warning level, counted in
// Stats, and cached in a second replayer; it never replaces the last valid
// configuration, which stays cached and in force. A document equal to the one
// processed just before (same version, same outcome) is counted as unchanged
// and not published again.
//
// # Replay
//
// Replayer replays the last valid configuration and then, when the last
// document processed was refused, the last invalid one, so that a new
// leader's consumers end holding the content in force and the status in
// force, in the order they happened. A consumer takes the status by arrival
// order, except that an event older (by timestamp) than the one of the other
// type it holds is history: that covers a replay racing a newer live
// outcome (see pkg/controller/LEADER_ONLY_COMPONENTS.md).
//
// # Concurrency properties
//
// Start owns one goroutine for the source; documents from the source and
// from Update are processed one at a time on Start's goroutine, so events
// are cached and published in the order they were processed. Stats, Synced,
// Current and Replayer are safe for concurrent use at any time. Update
// blocks until its document was processed; before Start it waits for Start.
//
// The package hands out no channels and subscribes to nothing on the bus.
package configchange
