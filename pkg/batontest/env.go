package batontest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// The versions of the control plane this module is tested against, which the
// repository's hack/testenv.sh builds; its cache directory is named after them.
// TestVersionsMatchTestenvScript keeps the two in step.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.6.16"
)

// Env is a running etcd and kube-apiserver: a real API server for a test.
type Env struct {
	// crds are the CustomResourceDefinitions installed at start.
	crds      []*apiextensionsv1.CustomResourceDefinition
	config    *rest.Config
	clientset kubernetes.Interface
	// kubeconfig is a kubeconfig file's content for the admin user.
	kubeconfig []byte
	// certDir holds the API server's certificates; owned by Env so that a
	// restarted API server keeps them.
	certDir string

	// mu serialises stop, start and close of the control plane.
	mu       sync.Mutex
	env      *envtest.Environment
	apiUp    bool
	closed   bool
	closeErr error
}

// StartEnv starts etcd and kube-apiserver for t, registers t.Cleanup to stop
// them, and fails t (never skips) when they cannot be started. t may be a
// *testing.T, a *testing.B, or Ginkgo's GinkgoTB() (see the package doc).
func StartEnv(t testing.TB, opts ...EnvOption) *Env {
	t.Helper()
	e, err := NewEnv(opts...)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return e
}

// NewEnv starts etcd and kube-apiserver. The caller must call [Env.Close]. It
// is meant for TestMain, to share one API server between a package's tests;
// a test of its own uses [StartEnv].
func NewEnv(opts ...EnvOption) (*Env, error) {
	var o envOptions
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	quietOnce.Do(func() {
		if !verbose() {
			ctrllog.SetLogger(logr.Discard())
		}
	})
	certDir, err := os.MkdirTemp("", "baton-testenv-")
	if err != nil {
		return nil, fmt.Errorf("batontest: %w", err)
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		AttachControlPlaneOutput: verbose(),
		// Why this long: on a loaded 2-core machine (a whole test run starts an API
		// server per package, several at once) kube-apiserver can take over
		// envtest's default 20s to get ready.
		ControlPlaneStartTimeout: 90 * time.Second,
		CRDInstallOptions:        o.crds,
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(dir, "kube-apiserver")
	api.CertDir = certDir
	// kube-apiserver's graceful stop waits for open watches up to its request timeout
	// (default 1m); every client of a test watches, so keep the stop to seconds.
	api.Configure().Set("request-timeout", stopGrace.String())
	if path := os.Getenv("BATON_TESTENV_AUDIT"); path != "" {
		if err := auditTo(func(flag, value string) { api.Configure().Set(flag, value) }, certDir, path); err != nil {
			_ = os.RemoveAll(certDir)
			return nil, err
		}
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("batontest: start control plane from %s: %w", dir, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(certDir)
		return nil, fmt.Errorf("batontest: clientset: %w", err)
	}
	return &Env{
		crds:       env.CRDs,
		config:     cfg,
		clientset:  cs,
		kubeconfig: env.KubeConfig,
		certDir:    certDir,
		env:        env,
		apiUp:      true,
	}, nil
}

var quietOnce sync.Once

// stopGrace is kube-apiserver's --request-timeout, and so how long its graceful stop
// may wait for open watches to end.
const stopGrace = 3 * time.Second

// VerboseEnv names the environment variable that, set to 1, attaches the
// output of etcd and kube-apiserver to the test process and keeps
// controller-runtime's logger.
const VerboseEnv = "BATON_TESTENV_VERBOSE"

func verbose() bool { return os.Getenv(VerboseEnv) == "1" }

// AssetsDir returns the directory holding the etcd and kube-apiserver
// binaries: KUBEBUILDER_ASSETS when set, else the cache directory of
// hack/testenv.sh (see the package doc). The error wraps [ErrNoBinaries]
// when a binary is missing.
func AssetsDir() (string, error) {
	dir, fromEnv := os.LookupEnv("KUBEBUILDER_ASSETS")
	if !fromEnv || dir == "" {
		var err error
		dir, err = cacheDir()
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoBinaries, err)
		}
	}
	return dir, checkBinaries(dir)
}

// cacheDir mirrors the directory choice of hack/testenv.sh.
func cacheDir() (string, error) {
	if d := os.Getenv("BATON_TESTENV_DIR"); d != "" {
		return d, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "baton", "k8s-"+KubernetesVersion+"-etcd-"+EtcdVersion), nil
}

func checkBinaries(dir string) error {
	for _, name := range []string{"etcd", "kube-apiserver"} {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrNoBinaries, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%w: %s is not an executable file", ErrNoBinaries, p)
		}
	}
	return nil
}

// CRDs returns the CustomResourceDefinitions installed at start ([WithCRDs]).
func (e *Env) CRDs() []*apiextensionsv1.CustomResourceDefinition { return slices.Clone(e.crds) }

// Config returns a copy of the admin user's REST config.
func (e *Env) Config() *rest.Config { return rest.CopyConfig(e.config) }

// Clientset returns a clientset for the admin user, shared by all callers.
func (e *Env) Clientset() kubernetes.Interface { return e.clientset }

// Kubeconfig writes a kubeconfig file for the admin user into t.TempDir() and
// returns its path, for subprocesses.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, e.kubeconfig, 0o600); err != nil {
		t.Fatalf("batontest: write kubeconfig: %v", err)
	}
	return p
}

// StopAPIServer stops kube-apiserver and waits for it to exit; etcd keeps
// running. The server stops listening at once and ends open watches within 3s
// (its --request-timeout); it is killed if it has not exited after 20s. It is a
// no-op when the server is already stopped.
func (e *Env) StopAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || !e.apiUp {
		return nil
	}
	e.apiUp = false
	if err := e.env.ControlPlane.APIServer.Stop(); err != nil {
		return fmt.Errorf("batontest: stop kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after [Env.StopAPIServer], on the
// same address with the same certificates and the same etcd, and returns once
// it answers /healthz. It is a no-op when the server is running.
func (e *Env) StartAPIServer() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	if e.apiUp {
		return nil
	}
	if err := e.env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("batontest: start kube-apiserver: %w", err)
	}
	e.apiUp = true
	return nil
}

// Close stops kube-apiserver and etcd and removes their files. Later calls
// return the first call's result.
func (e *Env) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return e.closeErr
	}
	e.closed = true
	err := e.env.Stop()
	if rmErr := os.RemoveAll(e.certDir); rmErr != nil {
		err = errors.Join(err, rmErr)
	}
	if err != nil {
		e.closeErr = fmt.Errorf("batontest: stop control plane: %w", err)
	}
	return e.closeErr
}

// auditPolicy logs every request at the Metadata level once its response is complete:
// what it was, and when the API server received it and answered.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`

// auditTo makes kube-apiserver write its audit log, JSON lines, to path (appended to
// when it exists): BATON_TESTENV_AUDIT. set sets one of its flags.
func auditTo(set func(flag, value string), certDir, path string) error {
	policy := filepath.Join(certDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return fmt.Errorf("batontest: BATON_TESTENV_AUDIT: %w", err)
	}
	set("audit-policy-file", policy)
	set("audit-log-path", path)
	set("audit-log-format", "json")
	set("audit-log-mode", "blocking")
	return nil
}
