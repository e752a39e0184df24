package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors of the package. Every error Load, Parse and Validate return matches
// ErrInvalid with errors.Is; parse failures also match ErrParse.
var (
	// ErrInvalid matches every error that refuses a configuration.
	ErrInvalid = errors.New("config: invalid")
	// ErrParse matches the errors of a document that cannot be decoded.
	ErrParse = errors.New("config: cannot parse")
)

// FieldError is one broken rule, naming the field by its path in the
// document, for example "backends[1].port".
type FieldError struct {
	Field   string
	Message string
}

// Error returns "field: message".
func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Is reports whether target is ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// ValidationError lists the rules a configuration breaks, in document
// order: the first MaxListedErrors of them, and how many more. Errors is
// never empty.
type ValidationError struct {
	Errors []*FieldError
	// Omitted counts the problems found after the first MaxListedErrors,
	// which Errors leaves out.
	Omitted int
}

// Error returns "config: invalid: " followed by the field errors joined by
// "; ", and "; and N more problems" when some were left out.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("config: invalid: ")
	for i, fe := range e.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(fe.Error())
	}
	if e.Omitted > 0 {
		fmt.Fprintf(&b, "; %s", omitted(e.Omitted))
	}
	return b.String()
}

func omitted(n int) string { return fmt.Sprintf("and %d more problems", n) }

// Is reports whether target is ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the field errors, so errors.As finds each *FieldError.
func (e *ValidationError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i, fe := range e.Errors {
		errs[i] = fe
	}
	return errs
}

// parseError is a document that could not be decoded.
type parseError struct{ err error }

// Error returns "config: cannot parse: " and the decoder's message, cut to
// maxParseMessage bytes: a decoder quotes what it could not decode (an
// unknown key, whole), and a document may be a megabyte.
func (e *parseError) Error() string {
	return "config: cannot parse: " + clip(e.err.Error(), maxParseMessage)
}

// maxParseMessage is the most bytes of a decoder's message a parse error
// keeps.
const maxParseMessage = 256

func (e *parseError) Is(target error) bool { return target == ErrParse || target == ErrInvalid }

func (e *parseError) Unwrap() error { return e.err }

// Reasons flattens an error returned by Load, Parse or Validate into one
// message per problem: each field error of a *ValidationError (and then
// "and N more problems" if it left some out), or the error's message
// otherwise. It returns nil for a nil error. Every message quotes at most
// MaxQuoted bytes of any one input value, so the reasons of any document
// are at most MaxListedErrors+1 short lines.
func Reasons(err error) []string {
	if err == nil {
		return nil
	}
	var verr *ValidationError
	if errors.As(err, &verr) {
		out := make([]string, 0, len(verr.Errors)+1)
		for _, fe := range verr.Errors {
			out = append(out, fe.Error())
		}
		if verr.Omitted > 0 {
			out = append(out, omitted(verr.Omitted))
		}
		return out
	}
	return []string{err.Error()}
}

// quote returns s quoted as by %q, or, when s is longer than MaxQuoted
// bytes, its first MaxQuoted bytes (cut at a character boundary) quoted,
// followed by "… (N bytes)".
func quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q… (%d bytes)", cutAt(s, MaxQuoted), len(s))
}

// clip returns s, or its first max bytes (cut at a character boundary)
// followed by "… (N bytes)" when it is longer.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return fmt.Sprintf("%s… (%d bytes)", cutAt(s, max), len(s))
}

// cutAt returns the longest prefix of s of at most n bytes that does not
// end inside a UTF-8 sequence.
func cutAt(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
