package batontest

import "errors"

var (
	// ErrNoBinaries is returned (wrapped) by [NewEnv] and [AssetsDir] when the
	// etcd or kube-apiserver binary is missing.
	ErrNoBinaries = errors.New("batontest: etcd and kube-apiserver binaries not found: set KUBEBUILDER_ASSETS to their directory (setup-envtest prints one; in Baton's repository, run hack/test.sh, which builds them once per machine)")
	// ErrCRDPath is returned (wrapped, with the path) by [NewEnv] when a path given
	// to [WithCRDs] does not exist.
	ErrCRDPath = errors.New("batontest: CRD path not found")
	// ErrClosed is returned by [Env.StartAPIServer] after [Env.Close].
	ErrClosed = errors.New("batontest: environment is closed")
	// ErrCut is what a request through a cut [Switch] fails with.
	ErrCut = errors.New("batontest: cut off the API server")
)
