// Package batontest is a kit for testing a controller built on Baton the way it runs:
// several replicas, in one test process, against a real API server, with the network
// between each replica and the server under the test's control.
//
// # Usage
//
// Start an API server (etcd and kube-apiserver, through controller-runtime's envtest),
// make the replicas, build your controller on each and run it:
//
//	env := batontest.StartEnv(t)
//	rs := batontest.NewReplicas(t, 3, env.Config())
//	for _, r := range rs {
//		mgr, err := setup(r.Name, r.Config()) // your controller, named r.Name
//		if err != nil {
//			t.Fatal(err)
//		}
//		r.Run(t, mgr.Start)
//	}
//
// Then take the leader away: r.Switch.Cut() cuts it off the API server (its term ends
// by its own clock once the renew deadline passed), r.Switch.Hold() keeps its requests
// in flight so that r.Switch.Heal() delivers them after the next leader wrote, and
// r.Stop(t) stops it gracefully, as SIGTERM does. [WaitFor] waits for what the
// replicas do on their own, and [WatchStamps] fails the test if a term stamp on any
// ConfigMap ever goes back; [WatchStampsOf] does the same for any kind, custom
// resources included.
//
// # Custom resources
//
// [WithCRDs] installs the CustomResourceDefinitions of a directory (a kubebuilder
// project's config/crd/bases) before [StartEnv] returns, and waits until the API
// server serves them; [WithCRDInstallOptions] takes envtest's CRDInstallOptions
// whole:
//
//	env := batontest.StartEnv(t, batontest.WithCRDs(filepath.Join("..", "..", "config", "crd", "bases")))
//	monitor := batontest.WatchStampsOf(t, env.Config(), myv1.GroupVersion.WithKind("Widget"), controllerruntime.TermAnnotation)
//
// # Ginkgo
//
// Every function of the kit takes a testing.TB, and Ginkgo's GinkgoTB() is one
// (Ginkgo v2.13 and later): pass it where a plain test passes t. Its Cleanup is
// Ginkgo's DeferCleanup, so what the kit starts in a BeforeAll (or BeforeSuite) is
// stopped after the container's (or suite's) last spec, and a failure fails the
// spec. In a kubebuilder project's suite_test.go, in place of envtest.Environment:
//
//	var env *batontest.Env
//
//	var _ = BeforeSuite(func() {
//		env = batontest.StartEnv(GinkgoTB(), batontest.WithCRDs(filepath.Join("..", "..", "config", "crd", "bases")))
//	})
//
//	var _ = Describe("the controller", func() {
//		It("fails over", func() {
//			rs := batontest.NewReplicas(GinkgoTB(), 3, env.Config())
//			// build and Run the replicas as above, with GinkgoTB() for t
//		})
//	})
//
// ginkgo_test.go runs such a suite. The wrapper does not implement testing.TB's
// ArtifactDir (Go 1.26), which the kit never calls.
//
// # Finding the binaries
//
// KUBEBUILDER_ASSETS names the directory holding etcd and kube-apiserver, as for
// envtest (setup-envtest prints one). When it is unset, the cache directory of Baton's
// hack/testenv.sh is used (BATON_TESTENV_DIR, else
// $XDG_CACHE_HOME/baton/k8s-<version>-etcd-<version>, else the same under
// $HOME/.cache). When the binaries are not there, [StartEnv] fails the test (and
// [NewEnv] returns [ErrNoBinaries]). It never skips: a test that needs the API server
// and cannot get one must fail loudly.
//
// A package whose tests can share one API server starts it in TestMain with [NewEnv]
// and calls [Env.Close] after m.Run, which saves the few seconds of a start per test.
//
// # Restarting the API server
//
// [Env.StopAPIServer] and [Env.StartAPIServer] stop and start kube-apiserver alone.
// etcd keeps running and keeps its data; the server comes back on the same address
// with the same certificates, so the rest.Config, the clientset and the kubeconfig
// files handed out before stay valid. kube-apiserver runs with --request-timeout=3s:
// its graceful stop waits for open watches up to that timeout (a minute by default).
//
// # Concurrency properties
//
// An [Env], a [Switch], a [Replica] and a [StampMonitor] are safe for concurrent use.
// [Env.StopAPIServer], [Env.StartAPIServer] and [Env.Close] are serialised by a mutex.
// A Replica's run has a goroutine of its own, which Stop (or the end of the test) ends
// and waits for; a StampMonitor's watch too.
//
// # Side effects
//
// The first [StartEnv] or [NewEnv] sets controller-runtime's global logger to a
// discarding one (controller-runtime otherwise prints a warning after 30s), unless
// BATON_TESTENV_VERBOSE=1, which also attaches the output of etcd and kube-apiserver
// to the test process's stdout and stderr.
//
// BATON_TESTENV_AUDIT=<file> makes every kube-apiserver started write its audit log
// there: one JSON line per request, with when it was received and answered. It tells
// the API server's own time for each request, and what else it served meanwhile, from
// the time of the round trip a client saw (test/sharding's BenchmarkShardMoves).
package batontest
