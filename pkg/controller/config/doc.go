// Package config defines the controller's configuration: what the operator
// writes (in a ConfigMap in cluster mode, a file or the built-in default in
// embedded mode) and what the reference components validate, render and
// publish.
//
// # Usage
//
// Load is the one call a reader of configuration needs: it parses a YAML or
// JSON document strictly (unknown fields are errors), fills defaults,
// validates, and returns the configuration with its content version:
//
//	cfg, version, err := config.Load(raw)
//	var verr *config.ValidationError
//	if errors.As(err, &verr) {
//		for _, fe := range verr.Errors {
//			fmt.Println(fe) // backends[1].port: must be between 1 and 65535
//		}
//	}
//
// Parse, ApplyDefaults, Validate and Version are the steps of Load, exported
// for callers that need one of them alone.
//
// # Errors
//
// A document that cannot be decoded gives an error wrapping ErrParse. A
// document that decodes but breaks the rules gives a *ValidationError that
// lists every problem found, each a *FieldError naming the field by its path
// (frontends[0].defaultBackend, backends[1].port, maxConn); both kinds match
// errors.Is(err, ErrInvalid).
//
// # Versions
//
// Version hashes the canonical JSON form of a defaulted configuration, so two
// documents that differ only in layout, key order or an omitted default have
// the same version on every replica. RawVersion hashes raw bytes, for
// documents that never became a configuration.
//
// # Concurrency properties
//
// The functions are pure and safe for concurrent use. A *Config carried by an
// event is shared by every subscriber and must not be modified; Clone makes a
// private copy.
package config
