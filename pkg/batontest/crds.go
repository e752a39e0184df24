package batontest

import (
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// EnvOption configures [NewEnv] and [StartEnv].
type EnvOption func(*envOptions)

// envOptions are the EnvOptions given, applied in order.
type envOptions struct {
	crds envtest.CRDInstallOptions
}

// WithCRDs installs the CustomResourceDefinitions found in paths (directories of
// YAML or JSON files, or single files; kubebuilder's config/crd/bases is one) once
// the API server runs, and waits until the API server serves each of them, so that
// a test can create their objects at once. A path that does not exist is an error
// ([ErrCRDPath]): a typo must not leave a test running without its kinds.
func WithCRDs(paths ...string) EnvOption {
	return func(o *envOptions) {
		o.crds.Paths = append(o.crds.Paths, paths...)
		o.crds.ErrorIfPathMissing = true
	}
}

// WithCRDInstallOptions installs CustomResourceDefinitions as envtest's
// CRDInstallOptions say (paths, CRD objects, a scheme for conversion webhooks,
// the wait's timing), in place of what earlier options set. Paths are checked as
// [WithCRDs] checks them only when ErrorIfPathMissing is set.
func WithCRDInstallOptions(opts envtest.CRDInstallOptions) EnvOption {
	return func(o *envOptions) { o.crds = opts }
}

// check refuses paths that do not exist before anything starts.
func (o envOptions) check() error {
	if !o.crds.ErrorIfPathMissing {
		return nil
	}
	for _, p := range o.crds.Paths {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w: %v", ErrCRDPath, err)
		}
	}
	return nil
}
