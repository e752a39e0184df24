package config

import (
	"errors"
	"strings"
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

// ValidationError lists every rule a configuration breaks, in document
// order. It is never empty.
type ValidationError struct {
	Errors []*FieldError
}

// Error returns "config: invalid: " followed by the field errors joined by "; ".
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("config: invalid: ")
	for i, fe := range e.Errors {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(fe.Error())
	}
	return b.String()
}

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

func (e *parseError) Error() string { return "config: cannot parse: " + e.err.Error() }

func (e *parseError) Is(target error) bool { return target == ErrParse || target == ErrInvalid }

func (e *parseError) Unwrap() error { return e.err }

// Reasons flattens an error returned by Load, Parse or Validate into one
// message per problem: each field error of a *ValidationError, or the error's
// message otherwise. It returns nil for a nil error.
func Reasons(err error) []string {
	if err == nil {
		return nil
	}
	var verr *ValidationError
	if errors.As(err, &verr) {
		out := make([]string, len(verr.Errors))
		for i, fe := range verr.Errors {
			out[i] = fe.Error()
		}
		return out
	}
	return []string{err.Error()}
}
