package e2e

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/baton-dev/baton/deploy"
	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/configpublisher"
	"github.com/baton-dev/baton/pkg/controller/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The names of deploy/: the Role grants access to these only.
const (
	namespace      = "baton"
	serviceAccount = "baton"
	leaseName      = "baton-leader"
	configName     = "baton-config"
	publishedName  = "baton-published"
)

// The election timings of the test: short, with a second of margin between
// renew deadline and lease duration, as the election tests use.
var timings = []string{"--lease-duration=3s", "--renew-deadline=2s", "--retry-period=400ms"}

// TestRunFailover runs three `baton run` processes as the ServiceAccount of
// deploy/ (its Role and RoleBinding applied to a real API server), kills the
// leader with SIGKILL while the configuration and the pods change, and
// checks that the new leader's ConfigPublisher wrote the current
// configuration with its greater term, that a write with the old term is
// refused, and that SIGTERM stops the others cleanly, releasing the lease.
func TestRunFailover(t *testing.T) {
	bin := buildBaton(t)
	env := batontest.StartEnv(t)
	admin := env.Clientset()
	ctx := t.Context()

	applyManifests(t, admin)
	kubeconfig, sa := impersonating(t, env)
	// RBAC is enforced: the ServiceAccount may not read what its Role does
	// not grant.
	if _, err := sa.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing secrets as the ServiceAccount: %v, want forbidden", err)
	}

	createPod(t, admin, "haproxy-a", map[string]string{"app": "haproxy"}, "10.9.0.1")
	createPod(t, admin, "haproxy-b", map[string]string{"app": "haproxy"}, "10.9.0.2")
	createPod(t, admin, "web-1", map[string]string{"app": "web"}, "10.9.1.1")
	v1 := configVersion(t, admin)

	start := time.Now()
	procs := map[string]*proc{}
	for i := range 3 {
		id := fmt.Sprintf("baton-e2e-%d", i)
		procs[id] = startBaton(t, bin, kubeconfig, id)
	}

	// A leader publishes the configuration and the pods, stamped with its term.
	pub := published(t, admin)
	first := waitPublished(t, pub, 30*time.Second, func(p configpublisher.Published) bool {
		return p.Term > 0 && p.ConfigVersion == v1 && hasIP(p, "10.9.0.2")
	})
	leader := first.PublishedBy
	if holder := leaseHolder(t, admin); holder != leader {
		t.Fatalf("published by %q, the lease is held by %q", leader, holder)
	}
	if hasIP(first, "10.9.1.1") {
		t.Error("the published pods include a pod the selector does not match")
	}
	t.Logf("%s leads term %d and published config %s, %v after the start", leader, first.Term, v1, time.Since(start).Round(time.Millisecond))
	old := procs[leader]
	if old == nil {
		t.Fatalf("published by %q, not one of the processes", leader)
	}
	for id, p := range procs {
		m := p.get(t, "/metrics")
		wantLeader := map[bool]string{true: "1", false: "0"}[id == leader]
		if !strings.Contains(m, "\nbaton_is_leader "+wantLeader+"\n") {
			t.Errorf("%s: /metrics lacks baton_is_leader %s", id, wantLeader)
		}
		// Readiness comes once the informers synced, which may be after the
		// leader's first publish.
		if r := p.await(t, "/readyz", "ok\n", 30*time.Second); r != "ok\n" {
			t.Errorf("%s: /readyz = %q", id, r)
		}
		if h := p.get(t, "/healthz"); h != "ok\n" {
			t.Errorf("%s: /healthz = %q", id, h)
		}
	}
	if m := old.get(t, "/metrics"); !strings.Contains(m, fmt.Sprintf("\nbaton_term %d\n", first.Term)) {
		t.Errorf("%s: /metrics lacks baton_term %d", leader, first.Term)
	}

	// Kill the leader, then change the configuration and the pods while the
	// lease is still held by the dead process: the next leader learns them
	// only through its own informers and the replays of its term.
	old.kill(t)
	killed := time.Now()
	cm, err := admin.CoreV1().ConfigMaps(namespace).Get(ctx, configName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data["config.yaml"] = strings.Replace(cm.Data["config.yaml"], "maxConn: 2000", "maxConn: 3000", 1)
	if _, err := admin.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	v2 := configVersion(t, admin)
	if v2 == v1 {
		t.Fatal("the configuration change did not change the version")
	}
	createPod(t, admin, "haproxy-c", map[string]string{"app": "haproxy"}, "10.9.0.3")

	second := waitPublished(t, pub, 30*time.Second, func(p configpublisher.Published) bool {
		return p.Term > first.Term && p.ConfigVersion == v2 && hasIP(p, "10.9.0.3")
	})
	t.Logf("%s leads term %d and published config %s, %v after the kill", second.PublishedBy, second.Term, v2, time.Since(killed).Round(time.Millisecond))
	if second.PublishedBy == leader || procs[second.PublishedBy] == nil {
		t.Fatalf("published by %q after %q was killed", second.PublishedBy, leader)
	}
	if cfg := second.Data[configpublisher.KeyRendered]; !strings.Contains(cfg, " 10.9.0.3:8080 ") || !strings.Contains(cfg, "maxconn 3000") {
		t.Errorf("the published render lacks the new pod or the new maxconn:\n%s", cfg)
	}
	if second.Status != configpublisher.StatusValid {
		t.Errorf("status %s %v", second.Status, second.Reasons)
	}
	if holder := leaseHolder(t, admin); holder != second.PublishedBy {
		t.Errorf("published by %q, the lease is held by %q", second.PublishedBy, holder)
	}

	// A write with the old term is refused, even with the controller's own
	// credentials, and changes nothing.
	saStore, err := store.NewConfigMap(sa, namespace, publishedName)
	if err != nil {
		t.Fatal(err)
	}
	before, err := pub.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = configpublisher.Write(ctx, saStore, configpublisher.Record{
		Term: first.Term, Identity: leader, Status: configpublisher.StatusValid,
		Content: &configpublisher.Payload{Data: map[string]string{"stale": "from the killed leader's term"}, ConfigVersion: v1},
	})
	if !errors.Is(err, configpublisher.ErrStaleTerm) {
		t.Errorf("write with the old term %d: %v, want ErrStaleTerm", first.Term, err)
	}
	if after, err := pub.Get(ctx); err != nil || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the refused write changed the object: resourceVersion %s -> %s (%v)", before.ResourceVersion, after.ResourceVersion, err)
	}

	newLeader := procs[second.PublishedBy]
	m := newLeader.get(t, "/metrics")
	for _, want := range []string{
		"\nbaton_is_leader 1\n",
		fmt.Sprintf("\nbaton_term %d\n", second.Term),
		"\nbaton_handover_seconds_count 1\n",
		`baton_replays_total{type="config.validated"}`,
		`baton_replays_total{type="pods.discovered"}`,
		"\nbaton_term_ready_seconds_count 1\n",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("%s: /metrics lacks %q", second.PublishedBy, strings.TrimSpace(want))
		}
	}

	// SIGTERM: the others stop cleanly, and the last leader releases.
	var wg sync.WaitGroup
	for id, p := range procs {
		if id != leader {
			wg.Go(func() { p.terminate(t) })
		}
	}
	wg.Wait()
	if holder := leaseHolder(t, admin); holder != "" {
		t.Errorf("lease held by %q after every process stopped gracefully, want released", holder)
	}
	t.Logf("the whole test took %v", time.Since(start).Round(time.Millisecond))
}

// buildBaton builds cmd/baton into a temporary directory.
func buildBaton(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "baton")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "github.com/baton-dev/baton/cmd/baton")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// applyManifests creates the namespace, the RBAC and the configuration of
// deploy/ (not the Deployment: there is no kubelet).
func applyManifests(t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	objs, err := deploy.Objects()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, o := range objs {
		var err error
		switch v := o.Object.(type) {
		case *corev1.Namespace:
			_, err = cs.CoreV1().Namespaces().Create(ctx, v, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = cs.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = cs.RbacV1().Roles(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = cs.RbacV1().RoleBindings(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = cs.CoreV1().ConfigMaps(v.Namespace).Create(ctx, v, metav1.CreateOptions{})
		default:
			continue
		}
		if err != nil {
			t.Fatalf("apply %s: %v", o.File, err)
		}
	}
	// Pods name the namespace's default ServiceAccount, which no controller
	// manager creates here.
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// impersonating writes a kubeconfig that acts as deploy/'s ServiceAccount,
// and returns it with a clientset of the same identity.
func impersonating(t *testing.T, env *batontest.Env) (string, kubernetes.Interface) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + namespace + ":" + serviceAccount
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = user
	}
	path := filepath.Join(t.TempDir(), "kubeconfig-sa")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return path, cs
}

// createPod creates a pod and plays the kubelet: running, ready, with ip.
func createPod(t *testing.T, cs kubernetes.Interface, name string, labels map[string]string, ip string) {
	t.Helper()
	ctx := t.Context()
	p, err := cs.CoreV1().Pods(namespace).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: corev1.PodSpec{
			Containers:                   []corev1.Container{{Name: "haproxy", Image: "haproxy:3.2"}},
			AutomountServiceAccountToken: new(bool),
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP = ip
	p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if _, err := cs.CoreV1().Pods(namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update status of pod %s: %v", name, err)
	}
}

// configVersion returns the version of the configuration in the ConfigMap.
func configVersion(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	cm, err := cs.CoreV1().ConfigMaps(namespace).Get(t.Context(), configName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, v, err := config.Load([]byte(cm.Data["config.yaml"]))
	if err != nil {
		t.Fatalf("the configuration ConfigMap: %v", err)
	}
	return v
}

func published(t *testing.T, cs kubernetes.Interface) store.Store {
	t.Helper()
	s, err := store.NewConfigMap(cs, namespace, publishedName)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitPublished polls the published object until cond holds. The API
// server is real, so there is no fake clock to advance.
func waitPublished(t *testing.T, s store.Store, timeout time.Duration, cond func(configpublisher.Published) bool) configpublisher.Published {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last configpublisher.Published
	var lastErr error
	for time.Now().Before(deadline) {
		o, err := s.Get(t.Context())
		if err == nil {
			last, lastErr = configpublisher.Decode(o)
			if lastErr == nil && cond(last) {
				return last
			}
		} else {
			lastErr = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("published object not as expected within %v: %+v (%v)", timeout, last, lastErr)
	return last
}

func hasIP(p configpublisher.Published, ip string) bool {
	for _, v := range p.Data {
		if strings.Contains(v, ip) {
			return true
		}
	}
	return false
}

func leaseHolder(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	l, err := cs.CoordinationV1().Leases(namespace).Get(t.Context(), leaseName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get lease: %v", err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// proc is one `baton run` process.
type proc struct {
	id      string
	cmd     *exec.Cmd
	out     *lockedBuffer
	done    chan struct{} // closed when the process exited
	metrics string        // the address its /metrics is served on
}

func startBaton(t *testing.T, bin, kubeconfig, id string) *proc {
	t.Helper()
	p := &proc{id: id, out: &lockedBuffer{}, done: make(chan struct{})}
	args := append([]string{"run",
		"--kubeconfig=" + kubeconfig,
		"--namespace=" + namespace,
		"--lease-name=" + leaseName,
		"--config-configmap=" + configName,
		"--pod-selector=app=haproxy",
		"--published-configmap=" + publishedName,
		"--metrics-addr=127.0.0.1:0",
		"--log-format=json",
	}, timings...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), "POD_NAME="+id) // the identity, as the Deployment gives it
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = procAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("output of %s:\n%s", id, p.out.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for p.metrics == "" {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not serve its metrics within 30s:\n%s", id, p.out.String())
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited at start:\n%s", id, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
		p.metrics = logValue(p.out.String(), "serving metrics", "addr")
	}
	return p
}

// logValue returns the key of the first JSON log line whose msg is msg.
func logValue(log, msg, key string) string {
	for _, line := range strings.Split(log, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != msg {
			continue
		}
		if v, ok := rec[key].(string); ok {
			return v
		}
	}
	return ""
}

func (p *proc) get(t *testing.T, path string) string {
	t.Helper()
	resp, err := http.Get("http://" + p.metrics + path)
	if err != nil {
		t.Errorf("%s: GET %s: %v", p.id, path, err)
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

// await polls path until it answers want, or timeout passed; it returns
// the last answer.
func (p *proc) await(t *testing.T, path, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + p.metrics + path)
		got := ""
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			got = string(body)
		}
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill ends the process with SIGKILL: no release, no cleanup.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill %s: %v", p.id, err)
	}
	<-p.done
}

// terminate sends SIGTERM and expects a clean exit within 15s.
func (p *proc) terminate(t *testing.T) {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Errorf("SIGTERM %s: %v", p.id, err)
		return
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Errorf("%s did not stop within 15s of SIGTERM", p.id)
		return
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("%s exited with %d after SIGTERM", p.id, code)
	}
	if !strings.Contains(p.out.String(), `"msg":"baton run stopped"`) {
		t.Errorf("%s did not log its clean stop", p.id)
	}
	// --log-format json: every line is JSON, client-go's (through klog) too.
	for _, line := range strings.Split(strings.TrimSpace(p.out.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("%s: a log line is not JSON: %q", p.id, line)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writers.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
