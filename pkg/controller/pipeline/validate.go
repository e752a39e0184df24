package pipeline

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/baton-dev/baton/pkg/controller/config"
)

// LineError is one finding of HAProxyValidator: what is wrong, and on which
// line of the rendered output (1-based).
type LineError struct {
	Line int
	Msg  string
}

// Error returns "line N: msg".
func (e LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// HAProxyValidator is the reference Validator. It parses the rendered text
// as an HAProxy configuration made of global, defaults, frontend and
// backend sections and reports, with line numbers:
//
//   - a directive outside any section, or unknown to its section;
//   - a malformed directive: a bind or server without address:port, a port
//     out of range, a count that is not a number or out of its range
//     (maxconn up to config.MaxMaxConn, the others up to HAProxy's C int),
//     a port or count not in plain decimal ("+80", "080": the renderer
//     writes numbers in one spelling), an unknown mode or balance
//     algorithm, a malformed timeout;
//   - a section without its name, and duplicate frontend or backend names
//     (and duplicate server names within a backend);
//   - a use_backend or default_backend naming no backend section;
//   - a backend without servers, a frontend without bind.
//
// A finding quotes at most maxQuoted bytes of any one word of the text (a
// longer word is cut and its length given), so findings stay short
// whatever the text. It never fails to run, so its error result is always
// nil. The zero value is ready to use and safe for concurrent use.
type HAProxyValidator struct{}

// Validate reports the findings in line order.
func (HAProxyValidator) Validate(_ context.Context, output string) ([]error, error) {
	v := validation{
		frontends: map[string]int{},
		backends:  map[string]int{},
	}
	v.parse(output)
	v.finish()
	slices.SortStableFunc(v.errs, func(a, b LineError) int { return a.Line - b.Line })
	if len(v.errs) == 0 {
		return nil, nil
	}
	out := make([]error, len(v.errs))
	for i, e := range v.errs {
		out[i] = e
	}
	return out, nil
}

// section kinds.
const (
	secNone = iota
	secGlobal
	secDefaults
	secFrontend
	secBackend
)

var sectionNames = [...]string{secNone: "", secGlobal: "global", secDefaults: "defaults", secFrontend: "frontend", secBackend: "backend"}

// section is a frontend or backend being parsed.
type section struct {
	kind    int
	name    string
	line    int
	binds   int
	servers map[string]int // server name -> line
}

// reference is a use_backend or default_backend, resolved at the end.
type reference struct {
	line      int
	directive string
	backend   string
}

type validation struct {
	errs      []LineError
	cur       *section
	sections  []*section
	frontends map[string]int // name -> line of its header
	backends  map[string]int
	refs      []reference
}

func (v *validation) errorf(line int, format string, args ...any) {
	v.errs = append(v.errs, LineError{Line: line, Msg: fmt.Sprintf(format, args...)})
}

func (v *validation) parse(text string) {
	n := 0
	for raw := range strings.Lines(text) {
		n++
		line := raw
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "global":
			v.header(n, secGlobal, fields, false)
		case "defaults":
			v.header(n, secDefaults, fields, false)
		case "frontend":
			v.header(n, secFrontend, fields, true)
		case "backend":
			v.header(n, secBackend, fields, true)
		default:
			v.directive(n, fields)
		}
	}
}

// header opens a section. Global and defaults take no name (defaults may
// take one); frontend and backend need exactly one.
func (v *validation) header(line, kind int, fields []string, named bool) {
	s := &section{kind: kind, line: line}
	if kind == secBackend {
		s.servers = map[string]int{}
	}
	v.cur = s
	v.sections = append(v.sections, s)
	kw := sectionNames[kind]
	switch {
	case !named && kind == secGlobal && len(fields) > 1:
		v.errorf(line, "global takes no name, got %s", quote(fields[1]))
		return
	case !named && len(fields) > 2:
		v.errorf(line, "%s: unexpected arguments %s", kw, quote(strings.Join(fields[2:], " ")))
		return
	case !named:
		return
	case len(fields) < 2:
		v.errorf(line, "%s without a name", kw)
		return
	case len(fields) > 2:
		v.errorf(line, "%s %s: unexpected arguments %s", kw, quote(fields[1]), quote(strings.Join(fields[2:], " ")))
	}
	s.name = fields[1]
	if !validName(s.name) {
		v.errorf(line, "%s %s: invalid name (letters, digits, '-', '_', '.', ':')", kw, quote(s.name))
	}
	seen := v.frontends
	if kind == secBackend {
		seen = v.backends
	}
	if first, dup := seen[s.name]; dup {
		v.errorf(line, "duplicate %s %s (first on line %d)", kw, quote(s.name), first)
		return
	}
	seen[s.name] = line
}

// directive checks one line inside the current section.
func (v *validation) directive(line int, f []string) {
	kw, args := f[0], f[1:]
	if v.cur == nil {
		v.errorf(line, "directive %s outside any section", quote(kw))
		return
	}
	kind := v.cur.kind
	check, ok := directives[kind][kw]
	if !ok {
		v.errorf(line, "unknown directive %s in %s section", quote(kw), sectionNames[kind])
		return
	}
	if msg := check(v, line, args); msg != "" {
		v.errorf(line, "%s", msg)
	}
}

// finish resolves references and checks whole sections.
func (v *validation) finish() {
	for _, r := range v.refs {
		if _, ok := v.backends[r.backend]; !ok {
			v.errorf(r.line, "%s %s: no such backend", r.directive, quote(r.backend))
		}
	}
	for _, s := range v.sections {
		switch {
		case s.name == "":
		case s.kind == secBackend && len(s.servers) == 0:
			v.errorf(s.line, "backend %s has no servers", quote(s.name))
		case s.kind == secFrontend && s.binds == 0:
			v.errorf(s.line, "frontend %s has no bind", quote(s.name))
		}
	}
}

// checker validates a directive's arguments and returns "" or a message.
type checker func(v *validation, line int, args []string) string

var directives = map[int]map[string]checker{
	secGlobal: {
		"maxconn":  positiveInt("maxconn", config.MaxMaxConn),
		"nbthread": positiveInt("nbthread", maxInt),
		"log":      atLeast("log", 1),
		"daemon":   exactly("daemon", 0),
		"user":     exactly("user", 1),
		"group":    exactly("group", 1),
		"pidfile":  exactly("pidfile", 1),
	},
	secDefaults: {
		"mode":    oneOf("mode", "http", "tcp"),
		"log":     atLeast("log", 1),
		"timeout": timeout("connect", "client", "server", "queue", "http-request", "tunnel"),
		"option":  atLeast("option", 1),
		"retries": nonNegativeInt("retries", maxInt),
		"maxconn": positiveInt("maxconn", config.MaxMaxConn),
		"balance": balance,
	},
	secFrontend: {
		"bind":            bind,
		"default_backend": backendRef("default_backend"),
		"use_backend":     backendRef("use_backend"),
		"mode":            oneOf("mode", "http", "tcp"),
		"log":             atLeast("log", 1),
		"timeout":         timeout("client", "http-request"),
		"option":          atLeast("option", 1),
		"maxconn":         positiveInt("maxconn", config.MaxMaxConn),
		"acl":             atLeast("acl", 2),
	},
	secBackend: {
		"server":  server,
		"balance": balance,
		"mode":    oneOf("mode", "http", "tcp"),
		"log":     atLeast("log", 1),
		"timeout": timeout("connect", "server", "queue", "check", "tunnel"),
		"option":  atLeast("option", 1),
		"retries": nonNegativeInt("retries", maxInt),
	},
}

func exactly(kw string, n int) checker {
	return func(_ *validation, _ int, args []string) string {
		if len(args) != n {
			return fmt.Sprintf("%s takes %d argument(s), got %d", kw, n, len(args))
		}
		return ""
	}
}

func atLeast(kw string, n int) checker {
	return func(_ *validation, _ int, args []string) string {
		if len(args) < n {
			return fmt.Sprintf("%s needs at least %d argument(s), got %d", kw, n, len(args))
		}
		return ""
	}
}

// maxInt is the largest value of a C int, in which HAProxy keeps its
// counts.
const maxInt = 1<<31 - 1

func positiveInt(kw string, max int) checker {
	return count(kw, 1, max, "not a positive integer")
}

func nonNegativeInt(kw string, max int) checker {
	return count(kw, 0, max, "not a non-negative integer")
}

// count checks a directive of one count from min to max, in plain decimal;
// notInt is the message for a value that is no integer of at least min.
func count(kw string, min, max int, notInt string) checker {
	return func(_ *validation, _ int, args []string) string {
		if len(args) != 1 {
			return fmt.Sprintf("%s takes 1 argument, got %d", kw, len(args))
		}
		n, err := strconv.Atoi(args[0])
		switch {
		case err != nil || n < min:
			return fmt.Sprintf("%s %s: %s", kw, quote(args[0]), notInt)
		case n > max:
			return fmt.Sprintf("%s %d: above %d", kw, n, max)
		case args[0] != strconv.Itoa(n):
			return fmt.Sprintf("%s %s: not in plain decimal (%d)", kw, quote(args[0]), n)
		}
		return ""
	}
}

func oneOf(kw string, allowed ...string) checker {
	return func(_ *validation, _ int, args []string) string {
		if len(args) != 1 {
			return fmt.Sprintf("%s takes 1 argument, got %d", kw, len(args))
		}
		if !slices.Contains(allowed, args[0]) {
			return fmt.Sprintf("%s %s: must be one of %s", kw, quote(args[0]), strings.Join(allowed, ", "))
		}
		return ""
	}
}

var balance = oneOf("balance", "roundrobin", "static-rr", "leastconn", "first", "source", "uri")

// timeout checks "timeout KIND DURATION" where DURATION is digits with an
// optional unit (us, ms, s, m, h, d).
func timeout(kinds ...string) checker {
	return func(_ *validation, _ int, args []string) string {
		if len(args) != 2 {
			return fmt.Sprintf("timeout takes a kind and a duration, got %d argument(s)", len(args))
		}
		if !slices.Contains(kinds, args[0]) {
			return fmt.Sprintf("timeout %s: unknown here (want %s)", quote(args[0]), strings.Join(kinds, ", "))
		}
		if !validDuration(args[1]) {
			return fmt.Sprintf("timeout %s %s: not a duration", args[0], quote(args[1]))
		}
		return ""
	}
}

func validDuration(s string) bool {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return false
	}
	switch s[i:] {
	case "", "us", "ms", "s", "m", "h", "d":
		return true
	}
	return false
}

func bind(v *validation, _ int, args []string) string {
	v.cur.binds++
	if len(args) == 0 {
		return "bind: missing address:port"
	}
	addr := args[0]
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("bind %s: missing port", quote(addr))
	}
	if msg := checkPort(port); msg != "" {
		return fmt.Sprintf("bind %s: %s", quote(addr), msg)
	}
	return ""
}

func server(v *validation, line int, args []string) string {
	if len(args) == 0 {
		return "server without a name"
	}
	name := args[0]
	if first, dup := v.cur.servers[name]; dup {
		return fmt.Sprintf("duplicate server %s in backend %s (first on line %d)", quote(name), quote(v.cur.name), first)
	}
	v.cur.servers[name] = line
	if len(args) < 2 {
		return fmt.Sprintf("server %s: missing address:port", quote(name))
	}
	addr := args[1]
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("server %s: address %s: missing port", quote(name), quote(addr))
	}
	if host == "" {
		return fmt.Sprintf("server %s: address %s: missing host", quote(name), quote(addr))
	}
	if net.ParseIP(host) == nil && !validHostname(host) {
		return fmt.Sprintf("server %s: address %s: host is neither an IP nor a hostname", quote(name), quote(addr))
	}
	if msg := checkPort(port); msg != "" {
		return fmt.Sprintf("server %s: address %s: %s", quote(name), quote(addr), msg)
	}
	return ""
}

func backendRef(kw string) checker {
	return func(v *validation, line int, args []string) string {
		if len(args) == 0 {
			return kw + " without a backend name"
		}
		if kw == "default_backend" && len(args) > 1 {
			return fmt.Sprintf("default_backend %s: unexpected arguments %s", quote(args[0]), quote(strings.Join(args[1:], " ")))
		}
		if kw == "use_backend" && len(args) > 1 {
			if (args[1] != "if" && args[1] != "unless") || len(args) < 3 {
				return fmt.Sprintf("use_backend %s: want \"if|unless CONDITION\" after the name", quote(args[0]))
			}
		}
		v.refs = append(v.refs, reference{line: line, directive: kw, backend: args[0]})
		return ""
	}
}

func checkPort(p string) string {
	if p == "" {
		return "missing port"
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Sprintf("port %s is not a number", quote(p))
	}
	if n < 1 || n > 65535 {
		return fmt.Sprintf("port %d out of range 1-65535", n)
	}
	if p != strconv.Itoa(n) {
		return fmt.Sprintf("port %s: not in plain decimal (%d)", quote(p), n)
	}
	return ""
}

// maxQuoted is the most bytes of one word of the text a finding quotes.
const maxQuoted = 64

// quote returns s quoted as by %q, or, when s is longer than maxQuoted
// bytes, its first maxQuoted bytes (cut at a character boundary) quoted,
// followed by "… (N bytes)".
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	n := maxQuoted
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%q… (%d bytes)", s[:n], len(s))
}

func validName(s string) bool {
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return s != ""
}

func validHostname(s string) bool {
	if len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}
