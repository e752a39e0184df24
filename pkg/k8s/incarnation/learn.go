package incarnation

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Environment variables Learn reads: the pod's identity from the Downward API
// (fieldRef metadata.namespace, metadata.name, metadata.uid) and the container's name,
// set literally in the manifest (the Downward API cannot give it).
const (
	EnvPodNamespace = "POD_NAMESPACE"
	EnvPodName      = "POD_NAME"
	EnvPodUID       = "POD_UID"
	EnvContainer    = "CONTAINER_NAME"
	// EnvTerminationLog, when set, names the container's terminationMessagePath for
	// a manifest that moves it from DefaultTerminationLog (set it to the same value
	// as the container's terminationMessagePath), and for processes outside a pod
	// that play one (tests).
	EnvTerminationLog = "TERMINATION_MESSAGE_PATH"
)

// DefaultTerminationLog is Kubernetes' default terminationMessagePath.
const DefaultTerminationLog = "/dev/termination-log"

// ErrNotInPod is returned by Learn when none of POD_NAMESPACE, POD_NAME and POD_UID is
// set (CONTAINER_NAME alone is set by other environments too): the process does not
// run in a pod, and the death signal stays off.
var ErrNotInPod = errors.New("incarnation: not running in a pod (POD_NAMESPACE, POD_NAME and POD_UID not set)")

// LearnOptions are the inputs of Learn; the zero value reads the process environment,
// crypto/rand and DefaultTerminationLog.
type LearnOptions struct {
	// Getenv reads a variable; nil is os.Getenv.
	Getenv func(string) string
	// Random is the source of the nonce; nil is crypto/rand.
	Random io.Reader
	// TerminationLog is the container's terminationMessagePath; "" is the
	// variable EnvTerminationLog, and DefaultTerminationLog when that is unset too.
	TerminationLog string
}

// Learn returns this process's incarnation: the pod and container from the environment
// and a fresh nonce, which it has written to the termination message file (replacing
// what the file held) before it returns. Call it once, at process start, and record
// the result only if it returned no error. It returns ErrNotInPod when none of the
// three POD_ variables is set, and otherwise an error naming each missing variable, or the file it could not
// write.
func Learn(opts LearnOptions) (Incarnation, error) {
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	inc := Incarnation{
		PodNamespace: getenv(EnvPodNamespace),
		PodName:      getenv(EnvPodName),
		PodUID:       getenv(EnvPodUID),
		Container:    getenv(EnvContainer),
	}
	var missing []string
	for _, v := range []struct{ name, value string }{
		{EnvPodNamespace, inc.PodNamespace}, {EnvPodName, inc.PodName},
		{EnvPodUID, inc.PodUID}, {EnvContainer, inc.Container},
	} {
		if v.value == "" {
			missing = append(missing, v.name)
		}
	}
	switch {
	case len(missing) == 0:
	case inc.PodNamespace == "" && inc.PodName == "" && inc.PodUID == "":
		// CONTAINER_NAME alone is no sign of a pod: development containers set a
		// variable of that name too.
		return Incarnation{}, ErrNotInPod
	default:
		return Incarnation{}, fmt.Errorf("%w: environment variable %s not set", ErrInvalid, strings.Join(missing, ", "))
	}
	nonce, err := newNonce(opts.Random)
	if err != nil {
		return Incarnation{}, err
	}
	inc.Nonce = nonce
	if err := inc.Validate(); err != nil {
		return Incarnation{}, err
	}
	path := cmp.Or(opts.TerminationLog, getenv(EnvTerminationLog), DefaultTerminationLog)
	// The kubelet copies this file into the terminated state; until the line is in it,
	// no report can prove this incarnation over, so it must not be recorded before.
	if err := os.WriteFile(path, []byte(inc.TerminationLine()+"\n"), 0o644); err != nil {
		return Incarnation{}, fmt.Errorf("incarnation: writing the termination message file: %w", err)
	}
	return inc, nil
}

func newNonce(r io.Reader) (string, error) {
	var b [nonceDigits / 2]byte
	if r == nil {
		r = rand.Reader
	}
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("incarnation: drawing a nonce: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}
