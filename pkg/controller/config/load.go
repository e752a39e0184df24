package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// DefaultBalance is the balance algorithm ApplyDefaults gives a backend that
// names none.
const DefaultBalance = "roundrobin"

// DefaultYAML is the built-in configuration of embedded mode: one frontend
// on :8080 routing to one backend on the pods' port 8080.
const DefaultYAML = `# Baton's built-in configuration.
frontends:
  - name: http
    bind: ":8080"
    defaultBackend: web
backends:
  - name: web
    port: 8080
    balance: roundrobin
maxConn: 2000
`

// Load parses raw (YAML or JSON), applies defaults, validates, and returns
// the configuration with its Version. The error matches ErrInvalid; it
// wraps ErrParse for a document that cannot be decoded and is a
// *ValidationError for one that breaks the rules.
func Load(raw []byte) (*Config, string, error) {
	c, err := Parse(raw)
	if err != nil {
		return nil, "", err
	}
	ApplyDefaults(c)
	if err := Validate(c); err != nil {
		return nil, "", err
	}
	return c, Version(c), nil
}

// Default returns a fresh copy of the built-in configuration (DefaultYAML),
// defaulted and valid.
func Default() *Config {
	c, _, err := Load([]byte(DefaultYAML))
	if err != nil {
		panic("config: built-in default is invalid: " + err.Error()) // a test keeps this unreachable
	}
	return c
}

// Parse decodes a YAML or JSON document strictly: unknown fields, duplicate
// keys and values of the wrong type are errors, and so are a number
// (maxConn, a port) not written in plain decimal (YAML 1.1 reads "0120" as
// 80, and "+80", "0x50", "8_0" as 80 too) and a document of more than
// MaxDocumentSize bytes. It neither defaults nor validates.
// Errors wrap ErrParse.
func Parse(raw []byte) (*Config, error) {
	if len(raw) > MaxDocumentSize {
		return nil, &parseError{err: fmt.Errorf("document is %d bytes, at most %d are allowed", len(raw), MaxDocumentSize)}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &parseError{err: errors.New("document is empty")}
	}
	var c Config
	if err := yaml.UnmarshalStrict(raw, &c); err != nil {
		return nil, &parseError{err: err}
	}
	if err := numberSpelling(raw, &c); err != nil {
		return nil, &parseError{err: err}
	}
	return &c, nil
}

// ApplyDefaults fills the fields a document may leave out: a backend's
// Balance becomes DefaultBalance. It modifies c, which must not be shared.
func ApplyDefaults(c *Config) {
	if c == nil {
		return
	}
	for i := range c.Backends {
		if c.Backends[i].Balance == "" {
			c.Backends[i].Balance = DefaultBalance
		}
	}
}

// Version returns the content version of a defaulted configuration: the
// first 16 hex digits of the SHA-256 of its canonical JSON form. Equal
// configurations have equal versions whatever their source layout.
func Version(c *Config) string {
	b, err := json.Marshal(c)
	if err != nil {
		// Config holds only strings, ints and slices of them.
		panic("config: marshal: " + err.Error())
	}
	return hash16(b)
}

// RawVersion returns a version for a raw document, "raw-" followed by the
// first 16 hex digits of its SHA-256, for documents that did not load.
func RawVersion(raw []byte) string { return "raw-" + hash16(raw) }

func hash16(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Clone returns a deep copy of c (nil for nil).
func (c *Config) Clone() *Config {
	if c == nil {
		return nil
	}
	out := *c
	out.Frontends = append([]Frontend(nil), c.Frontends...)
	out.Backends = append([]Backend(nil), c.Backends...)
	return &out
}
