// Package testenv starts a real etcd and kube-apiserver for integration tests.
//
// The binaries are the ones hack/testenv.sh builds from the pinned tool
// modules under hack/tools; hack/test.sh builds them when missing and exports
// their directory as KUBEBUILDER_ASSETS. The control plane itself is started
// by sigs.k8s.io/controller-runtime/pkg/envtest.
//
// # Usage
//
// A test that needs its own API server calls [Start]; the server is stopped
// when the test ends:
//
//	env := testenv.Start(t)
//	leases := env.Clientset().CoordinationV1().Leases("default")
//
// A package whose tests can share one API server starts it in TestMain with
// [New] and calls [Env.Close] after m.Run, which saves the ~3s start per test.
//
// # Finding the binaries
//
// KUBEBUILDER_ASSETS names the directory holding etcd and kube-apiserver. When
// it is unset, the cache directory of hack/testenv.sh is used
// (BATON_TESTENV_DIR, else $XDG_CACHE_HOME/baton/k8s-<version>-etcd-<version>,
// else the same under $HOME/.cache). When the binaries are not there, [Start]
// fails the test (and [New] returns [ErrNoBinaries]) with a message that says
// to run hack/test.sh. It never skips: a test that needs the API server and
// cannot get one must fail loudly.
//
// # Restarting the API server
//
// [Env.StopAPIServer] and [Env.StartAPIServer] stop and start kube-apiserver
// alone. etcd keeps running and keeps its data; the server comes back on the
// same address with the same certificates, so the [rest.Config], the
// clientset and the kubeconfig files handed out before stay valid.
// kube-apiserver runs with --request-timeout=3s: its graceful stop waits for
// open watches up to that timeout (a minute by default).
//
// # Concurrency properties
//
// An [Env] may be used from many goroutines. [Env.StopAPIServer],
// [Env.StartAPIServer] and [Env.Close] are serialised by a mutex; the other
// methods only read fields fixed at start.
//
// # Side effects
//
// The first [Start] or [New] sets controller-runtime's global logger to a
// discarding one (controller-runtime otherwise prints a warning after 30s),
// unless BATON_TESTENV_VERBOSE=1, which also attaches the output of etcd and
// kube-apiserver to the test process's stdout and stderr.
package testenv
