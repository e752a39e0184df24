package config

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Limits of a configuration. Each is a rule of Validate (or Parse, for
// MaxDocumentSize); the comment says why the number is what it is.
const (
	// MaxNameLength is the longest frontend or backend name Validate accepts.
	MaxNameLength = 63

	// MaxFrontends is the most frontends a configuration may have. The
	// rendered text is published in one ConfigMap, which the API server
	// holds to 1 MiB; frontends and backends are kept to a number whose
	// sections leave that room to the backends' server lines (one per
	// ready pod, about 50 bytes each): with 64 backends, about 300 pods.
	MaxFrontends = 64
	// MaxBackends is the most backends a configuration may have; see
	// MaxFrontends.
	MaxBackends = 64

	// MaxMaxConn is the largest MaxConn Validate accepts. HAProxy reads
	// the global maxconn with strtol into a C int and sizes its table of
	// file descriptors at about twice maxconn, also an int: above 2^30 the
	// doubling overflows. 1,000,000,000 is the largest round number whose
	// doubling, plus HAProxy's listeners, checks and per-thread
	// descriptors, stays within an int. (HAProxy still needs the host to
	// allow that many open files, and says so when it starts.)
	MaxMaxConn = 1_000_000_000

	// MaxDocumentSize is the largest document Parse decodes, in bytes: the
	// API server's limit on a ConfigMap's data, applied to files too.
	MaxDocumentSize = 1 << 20

	// MaxQuoted is the most bytes of one input value an error message
	// quotes; a longer value is cut at a character boundary and the message
	// gives its full length.
	MaxQuoted = 64
	// MaxListedErrors is the most problems a *ValidationError lists; it
	// counts the others in Omitted.
	MaxListedErrors = 20
)

// Balances are the balance algorithms a backend may name.
var Balances = []string{"roundrobin", "leastconn", "source"}

var (
	namePattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
)

// Validate checks a defaulted configuration and returns nil or a
// *ValidationError listing, in document order, every rule it breaks (the
// first MaxListedErrors of them, and how many more):
//
//   - from one to MaxFrontends frontends and from one to MaxBackends
//     backends (a list over its limit is reported alone: its entries are
//     not checked one by one);
//   - names not empty, at most MaxNameLength characters of letters, digits,
//     '.', '_' and '-' starting with a letter or digit, unique among
//     frontends and among backends;
//   - a frontend's bind is host:port or :port in its one canonical
//     spelling (see Bind addresses below), and no two frontends' binds
//     overlap;
//   - a frontend's defaultBackend names a backend;
//   - a backend's port is from 1 to 65535 and its balance one of Balances;
//   - maxConn is from 0 (the renderer's default) to MaxMaxConn.
//
// # Bind addresses
//
// A bind is rendered as written, so each address has one spelling, and a
// bind written otherwise is refused with the spelling to use:
//
//   - the port in plain decimal: ":80", never ":+80" or ":0080" (HAProxy
//     would read them as 80, but leading zeros also read as octal to
//     some, and two spellings of one address would hide a duplicate);
//   - an IP address as net/netip prints it: "[::1]:80", not
//     "[0:0::1]:80"; "127.0.0.1:80", not "[127.0.0.1]:80"; an IPv4
//     address mapped into IPv6 ("[::ffff:10.0.0.1]") and addresses with
//     a zone are refused;
//   - a host name in lower case;
//   - all IPv4 addresses (the wildcard) keep HAProxy's three spellings,
//     ":80", "*:80" and "0.0.0.0:80", which are one address.
//
// Two binds overlap when HAProxy would listen on a common address and port
// for both (it sets SO_REUSEPORT, so the second bind would not fail: the
// two frontends would share the connections). On one port: the IPv4
// wildcard overlaps every IPv4 address; "[::]" overlaps every address,
// IPv4 included (a dual-stack socket, Linux's default); a host name
// overlaps either wildcard and the same name. A host name and an IP
// address are not compared: the name is resolved only when HAProxy starts.
func Validate(c *Config) error {
	if c == nil {
		return &ValidationError{Errors: []*FieldError{{Field: "config", Message: "is nil"}}}
	}
	var v validator
	checkFrontends := v.count("frontends", "frontend", len(c.Frontends), MaxFrontends)
	checkBackends := v.count("backends", "backend", len(c.Backends), MaxBackends)

	var backends map[string]int // nil when the backends were not checked
	if checkBackends {
		backends = make(map[string]int, len(c.Backends))
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
				v.add(field+".balance", fmt.Sprintf("%s is not one of %s", quote(b.Balance), strings.Join(Balances, ", ")))
			}
		}
	}

	if checkFrontends {
		frontends := make(map[string]int, len(c.Frontends))
		var binds []boundAddr
		for i, f := range c.Frontends {
			field := fmt.Sprintf("frontends[%d]", i)
			if v.name(field+".name", f.Name) {
				if first, dup := frontends[f.Name]; dup {
					v.add(field+".name", fmt.Sprintf("duplicate name %q (also frontends[%d])", f.Name, first))
				} else {
					frontends[f.Name] = i
				}
			}
			if a, ok := v.bind(field+".bind", f.Bind); ok {
				v.overlaps(field+".bind", a, binds)
				binds = append(binds, boundAddr{bindAddr: a, frontend: i})
			}
			switch _, known := backends[f.DefaultBackend]; {
			case f.DefaultBackend == "":
				v.add(field+".defaultBackend", "must not be empty")
			case !known && checkBackends:
				v.add(field+".defaultBackend", fmt.Sprintf("unknown backend %s", quote(f.DefaultBackend)))
			}
		}
	}

	switch {
	case c.MaxConn < 0:
		v.add("maxConn", "must not be negative")
	case c.MaxConn > MaxMaxConn:
		v.add("maxConn", fmt.Sprintf("%d is above %d, the most HAProxy can size its descriptor table for", c.MaxConn, MaxMaxConn))
	}
	if len(v.errs) == 0 {
		return nil
	}
	// Frontends come first in the document.
	sortByDocument(v.errs)
	verr := &ValidationError{Errors: v.errs}
	if len(v.errs) > MaxListedErrors {
		verr.Errors, verr.Omitted = v.errs[:MaxListedErrors:MaxListedErrors], len(v.errs)-MaxListedErrors
	}
	return verr
}

type validator struct{ errs []*FieldError }

func (v *validator) add(field, msg string) {
	v.errs = append(v.errs, &FieldError{Field: field, Message: msg})
}

// count checks the length of a list and reports whether its entries are
// to be checked: not when it is over its limit, so that a document of
// 20,000 frontends costs one error and no quadratic overlap check.
func (v *validator) count(field, noun string, n, limit int) bool {
	switch {
	case n == 0:
		v.add(field, "must have at least one "+noun)
	case n > limit:
		v.add(field, fmt.Sprintf("%d %ss: at most %d are allowed", n, noun, limit))
		return false
	}
	return true
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

// hostKind says what a bind's host is.
type hostKind int

const (
	anyIPv4  hostKind = iota // "", "*" or "0.0.0.0"
	anyIP                    // "::": every address, IPv4 too
	oneIP                    // one IPv4 or IPv6 address
	hostName                 // resolved when HAProxy starts
)

// bindAddr is a parsed bind.
type bindAddr struct {
	text string // as written, which is canonical
	kind hostKind
	ip   netip.Addr // oneIP
	name string     // hostName, in lower case
	port int
}

// boundAddr is a checked bind and the frontend that has it.
type boundAddr struct {
	bindAddr
	frontend int
}

// bind parses a bind address and reports whether it is valid and
// canonical (see Validate).
func (v *validator) bind(field, bind string) (bindAddr, bool) {
	if strings.TrimSpace(bind) == "" {
		v.add(field, "must not be empty")
		return bindAddr{}, false
	}
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		v.add(field, fmt.Sprintf("%s is not host:port or :port", quote(bind)))
		return bindAddr{}, false
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		v.add(field, fmt.Sprintf("port %s must be a number between 1 and 65535", quote(port)))
		return bindAddr{}, false
	}
	a := bindAddr{text: bind, port: n}
	canonicalHost := host
	switch ip, ipErr := netip.ParseAddr(host); {
	case host == "" || host == "*" || host == "0.0.0.0":
		a.kind = anyIPv4
	case ipErr == nil && ip.Zone() != "":
		v.add(field, fmt.Sprintf("host %s: an address with a zone is not supported", quote(host)))
		return bindAddr{}, false
	case ipErr == nil && ip.Is4In6():
		v.add(field, fmt.Sprintf("host %s is an IPv4 address mapped into IPv6: write the IPv4 address %s", quote(host), ip.Unmap()))
		return bindAddr{}, false
	case ipErr == nil:
		a.kind, a.ip, canonicalHost = oneIP, ip, ip.String()
		if ip.IsUnspecified() { // "::"; "0.0.0.0" is the IPv4 wildcard above
			a.kind = anyIP
		}
	case len(host) <= 253 && hostnamePattern.MatchString(host):
		a.kind, a.name = hostName, strings.ToLower(host)
		canonicalHost = a.name
	default:
		v.add(field, fmt.Sprintf("host %s is not an IP address or host name", quote(host)))
		return bindAddr{}, false
	}
	if want := net.JoinHostPort(canonicalHost, strconv.Itoa(n)); want != bind {
		v.add(field, fmt.Sprintf("%s: write it as %q (ports in plain decimal, IP addresses in their shortest form, host names in lower case)", quote(bind), want))
		return bindAddr{}, false
	}
	return a, true
}

// overlaps reports a if it overlaps one of the earlier binds.
func (v *validator) overlaps(field string, a bindAddr, earlier []boundAddr) {
	for _, b := range earlier {
		if !overlap(a, b.bindAddr) {
			continue
		}
		if a.kind == b.kind && a.ip == b.ip && a.name == b.name {
			v.add(field, fmt.Sprintf("address %s already bound by frontends[%d]", quote(a.text), b.frontend))
		} else {
			v.add(field, fmt.Sprintf("address %s overlaps %s of frontends[%d]", quote(a.text), quote(b.text), b.frontend))
		}
		return
	}
}

// overlap reports whether HAProxy would listen on a common address and
// port for both binds.
func overlap(a, b bindAddr) bool {
	if a.port != b.port {
		return false
	}
	if a.kind > b.kind {
		a, b = b, a
	}
	switch a.kind {
	case anyIPv4:
		return b.kind != oneIP || b.ip.Is4()
	case anyIP:
		return true
	case oneIP:
		return b.kind == oneIP && a.ip == b.ip
	default: // both host names
		return a.name == b.name
	}
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
