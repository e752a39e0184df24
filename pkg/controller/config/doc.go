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
// Errors are bounded whatever the document, because they end up in logs,
// events and Stats: a message quotes at most MaxQuoted bytes of any one
// value (a longer one is cut and its length given), a decoder's message is
// cut likewise, and a *ValidationError lists at most MaxListedErrors
// problems and counts the rest. A document may be at most MaxDocumentSize
// bytes.
//
// # Limits
//
// Every number has a range and every list a limit (MaxConn up to
// MaxMaxConn, ports 1 to 65535, at most MaxFrontends frontends and
// MaxBackends backends), and a bind address is accepted in one spelling
// only, so that the text rendered from it is what HAProxy reads and two
// spellings of one address cannot hide a duplicate. Validate lists the
// rules and says why each limit is what it is. Numbers too have one
// spelling, plain decimal: the YAML decoder would read a port written 0120
// as octal 80, so Parse refuses it.
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
