package config

import (
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MaxNameLength is the longest frontend or backend name Validate accepts.
const MaxNameLength = 63

// Balances are the balance algorithms a backend may name.
var Balances = []string{"roundrobin", "leastconn", "source"}

var (
	namePattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
)

// Validate checks a defaulted configuration and returns nil or a
// *ValidationError listing, in document order, every rule it breaks:
//
//   - at least one frontend and one backend;
//   - names not empty, at most MaxNameLength characters of letters, digits,
//     '.', '_' and '-' starting with a letter or digit, unique among
//     frontends and among backends;
//   - a frontend's bind is host:port or :port with a port from 1 to 65535,
//     the host an IP address, a host name or "*", and no two frontends bind
//     the same address;
//   - a frontend's defaultBackend names a backend;
//   - a backend's port is from 1 to 65535 and its balance one of Balances;
//   - maxConn is not negative.
func Validate(c *Config) error {
	if c == nil {
		return &ValidationError{Errors: []*FieldError{{Field: "config", Message: "is nil"}}}
	}
	var v validator
	if len(c.Frontends) == 0 {
		v.add("frontends", "must have at least one frontend")
	}
	if len(c.Backends) == 0 {
		v.add("backends", "must have at least one backend")
	}

	backends := make(map[string]int, len(c.Backends))
	for i, b := range c.Backends {
		field := fmt.Sprintf("backends[%d]", i)
		if v.name(field+".name", b.Name) {
			if first, dup := backends[b.Name]; dup {
				v.add(field+".name", fmt.Sprintf("duplicate name %q (also backends[%d])", b.Name, first))
			} else {
				backends[b.Name] = i
			}
		}
		if b.Port < 1 || b.Port > 65535 {
			v.add(field+".port", "must be between 1 and 65535")
		}
		if !slices.Contains(Balances, b.Balance) {
			v.add(field+".balance", fmt.Sprintf("%q is not one of %s", b.Balance, strings.Join(Balances, ", ")))
		}
	}

	frontends := make(map[string]int, len(c.Frontends))
	binds := make(map[string]int, len(c.Frontends))
	for i, f := range c.Frontends {
		field := fmt.Sprintf("frontends[%d]", i)
		if v.name(field+".name", f.Name) {
			if first, dup := frontends[f.Name]; dup {
				v.add(field+".name", fmt.Sprintf("duplicate name %q (also frontends[%d])", f.Name, first))
			} else {
				frontends[f.Name] = i
			}
		}
		if key, ok := v.bind(field+".bind", f.Bind); ok {
			if first, dup := binds[key]; dup {
				v.add(field+".bind", fmt.Sprintf("address %q already bound by frontends[%d]", f.Bind, first))
			} else {
				binds[key] = i
			}
		}
		switch _, known := backends[f.DefaultBackend]; {
		case f.DefaultBackend == "":
			v.add(field+".defaultBackend", "must not be empty")
		case !known:
			v.add(field+".defaultBackend", fmt.Sprintf("unknown backend %q", f.DefaultBackend))
		}
	}

	if c.MaxConn < 0 {
		v.add("maxConn", "must not be negative")
	}
	if len(v.errs) == 0 {
		return nil
	}
	// Frontends come first in the document.
	sortByDocument(v.errs)
	return &ValidationError{Errors: v.errs}
}

type validator struct{ errs []*FieldError }

func (v *validator) add(field, msg string) {
	v.errs = append(v.errs, &FieldError{Field: field, Message: msg})
}

// name checks a name and reports whether it is usable as a key.
func (v *validator) name(field, name string) bool {
	switch {
	case name == "":
		v.add(field, "must not be empty")
	case len(name) > MaxNameLength:
		v.add(field, fmt.Sprintf("must be at most %d characters", MaxNameLength))
	case !namePattern.MatchString(name):
		v.add(field, fmt.Sprintf("%q must be letters, digits, '.', '_' or '-', starting with a letter or digit", name))
	default:
		return true
	}
	return false
}

// bind checks a bind address and returns a key under which equal addresses
// compare equal (":80", "*:80" and "0.0.0.0:80" are one address).
func (v *validator) bind(field, bind string) (string, bool) {
	if strings.TrimSpace(bind) == "" {
		v.add(field, "must not be empty")
		return "", false
	}
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		v.add(field, fmt.Sprintf("%q is not host:port or :port", bind))
		return "", false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		v.add(field, fmt.Sprintf("port %q must be a number between 1 and 65535", port))
		return "", false
	}
	switch {
	case host == "" || host == "*" || host == "0.0.0.0":
		host = "*"
	case net.ParseIP(host) != nil:
		host = net.ParseIP(host).String()
	case len(host) <= 253 && hostnamePattern.MatchString(host):
		host = strings.ToLower(host)
	default:
		v.add(field, fmt.Sprintf("host %q is not an IP address or host name", host))
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(n)), true
}

// sortByDocument orders field errors as their fields appear in a document:
// frontends, then backends, then maxConn, keeping the order within each.
func sortByDocument(errs []*FieldError) {
	rank := func(fe *FieldError) int {
		switch {
		case strings.HasPrefix(fe.Field, "frontends"):
			return 0
		case strings.HasPrefix(fe.Field, "backends"):
			return 1
		default:
			return 2
		}
	}
	slices.SortStableFunc(errs, func(a, b *FieldError) int { return rank(a) - rank(b) })
}
