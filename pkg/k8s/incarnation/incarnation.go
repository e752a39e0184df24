package incarnation

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by the errors of Parse and Validate.
var ErrInvalid = errors.New("incarnation: invalid")

// Incarnation is one run of a process in a container of a pod. See the package doc.
type Incarnation struct {
	// PodNamespace, PodName and PodUID name the pod; the UID tells a pod from a later
	// one of the same name.
	PodNamespace string
	PodName      string
	PodUID       string
	// Container is the container's name in the pod spec.
	Container string
	// Nonce is drawn at process start (32 hex digits) and written to the container's
	// termination message file before the incarnation is recorded anywhere.
	Nonce string
}

// maxField bounds each field: Kubernetes names are at most 253 bytes, UIDs 36.
const maxField = 253

// Validate checks that every field is set, at most 253 bytes, and free of the
// separator "/" (and of spaces and newlines); the nonce is 32 lowercase hex digits. The
// error names each bad field.
func (inc Incarnation) Validate() error {
	var errs []error
	check := func(field, v string) {
		switch {
		case v == "":
			errs = append(errs, fmt.Errorf("%w: %s is empty", ErrInvalid, field))
		case len(v) > maxField:
			errs = append(errs, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrInvalid, field, len(v), maxField))
		case strings.ContainsAny(v, "/ \t\r\n"):
			errs = append(errs, fmt.Errorf("%w: %s %q contains '/' or a space", ErrInvalid, field, v))
		}
	}
	check("pod namespace", inc.PodNamespace)
	check("pod name", inc.PodName)
	check("pod UID", inc.PodUID)
	check("container", inc.Container)
	if !validNonce(inc.Nonce) {
		errs = append(errs, fmt.Errorf("%w: nonce %.64q is not %d lowercase hex digits", ErrInvalid, inc.Nonce, nonceDigits))
	}
	return errors.Join(errs...)
}

const nonceDigits = 32

func validNonce(s string) bool {
	if len(s) != nonceDigits {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// String encodes inc for the Lease (leaderelection.Config.Incarnation, kept in the
// annotation leaderelection.baton.dev/incarnation):
// "<namespace>/<pod>/<uid>/<container>/<nonce>".
func (inc Incarnation) String() string {
	return strings.Join([]string{inc.PodNamespace, inc.PodName, inc.PodUID, inc.Container, inc.Nonce}, "/")
}

// Parse decodes an annotation written by String. It returns an error wrapping
// ErrInvalid, quoting at most 64 bytes of s, when s is not such a value.
func Parse(s string) (Incarnation, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 5 {
		return Incarnation{}, fmt.Errorf("%w: %.64q has %d parts separated by '/', want 5", ErrInvalid, s, len(parts))
	}
	inc := Incarnation{PodNamespace: parts[0], PodName: parts[1], PodUID: parts[2], Container: parts[3], Nonce: parts[4]}
	if err := inc.Validate(); err != nil {
		return Incarnation{}, err
	}
	return inc, nil
}

// TerminationLine is the line the process writes to its termination message file, and
// that a terminated state must carry to prove inc over.
func (inc Incarnation) TerminationLine() string { return "baton-incarnation:" + inc.Nonce }
