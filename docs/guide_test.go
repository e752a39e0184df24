package docs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/baton-dev/baton/pkg/batontest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}

// goBlock matches a fenced Go code block.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestGettingStarted builds every ```go block of the guide as a program of its own,
// in a module that requires this repository through a replace, offline, and runs each
// as the guide says: three replicas at a time on one machine, against a real API
// server, the leader stopped with SIGTERM and another taking over. It builds
// examples/sharded from such a module as section 6 does, and runs it as it says.
func TestGettingStarted(t *testing.T) {
	text, err := os.ReadFile("GETTING-STARTED.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllStringSubmatch(string(text), -1)
	if len(blocks) != 2 {
		t.Fatalf("GETTING-STARTED.md: %d go blocks, want the two programs", len(blocks))
	}
	bins := make([]string, len(blocks))
	for i, b := range blocks {
		if !strings.HasPrefix(b[1], "package main\n") {
			t.Fatalf("block %d is not a complete program (package main)", i)
		}
		bins[i] = build(t, b[1])
	}
	sharded := buildPackage(t, "github.com/baton-dev/baton/examples/sharded")
	env := batontest.StartEnv(t)
	kubeconfig := env.Kubeconfig(t)
	t.Run("greeter", func(t *testing.T) { runGreeter(t, env.Clientset(), bins[0], kubeconfig) })
	t.Run("indexer", func(t *testing.T) { runIndexer(t, env.Clientset(), bins[1], kubeconfig) })
	t.Run("sharded", func(t *testing.T) { runSharded(t, env.Clientset(), sharded, kubeconfig) })
}

// TestShardedFragmentIsTheExamples: the fragment section 6 shows is
// examples/sharded's code, word for word (so it compiles where the example does).
func TestShardedFragmentIsTheExamples(t *testing.T) {
	text, err := os.ReadFile("GETTING-STARTED.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(text), "## 6. ")
	if !ok {
		t.Fatal("the guide has no section 6")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	m := regexp.MustCompile("(?s)\n```\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("section 6 shows no code fragment")
	}
	src, err := os.ReadFile(filepath.Join("..", "examples", "sharded", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	// Lines compared without their indentation.
	flat := func(s string) string {
		var out []string
		for line := range strings.Lines(s) {
			out = append(out, strings.TrimSpace(line))
		}
		return strings.Join(out, "\n")
	}
	if !strings.Contains(flat(string(src)), flat(m[1])) {
		t.Errorf("section 6's fragment is not in examples/sharded/main.go:\n%s", m[1])
	}
}

// TestReadmeQuickStartCompiles builds the README's Quick Start as a package of its
// own, against the core alone.
func TestReadmeQuickStartCompiles(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlock.FindAllStringSubmatch(string(text), -1)
	if len(blocks) != 1 {
		t.Fatalf("README.md: %d go blocks, want the Quick Start", len(blocks))
	}
	if strings.Contains(blocks[0][1], "pkg/controller/events") {
		t.Error("the Quick Start imports the reference controller's event catalog")
	}
	build(t, "package quickstart\n\n"+blocks[0][1])
}

// TestLineCounts keeps the sizes the guide gives the examples within a tenth of the
// truth.
func TestLineCounts(t *testing.T) {
	text, err := os.ReadFile("GETTING-STARTED.md")
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(string(text)), " ")
	for _, example := range []string{"lifecycle", "crmirror", "sharded"} {
		m := regexp.MustCompile("`examples/" + example + "`[^.]*? about (\\d+) lines").FindStringSubmatch(flat)
		if m == nil {
			t.Errorf("the guide gives no size of examples/%s", example)
			continue
		}
		said, _ := strconv.Atoi(m[1])
		src, err := os.ReadFile(filepath.Join("..", "examples", example, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(src, []byte("\n")); n < said*9/10 || n > said*11/10 {
			t.Errorf("the guide says examples/%s has about %d lines; it has %d", example, said, n)
		}
	}
}

// build builds src as a program (or a package) of its own and vets it; it returns
// the binary.
func build(t *testing.T, src string) string {
	t.Helper()
	dir := guideModule(t)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "program")
	for _, args := range [][]string{{"build", "-o", bin, "."}, {"vet", "."}} {
		if out, err := goIn(dir, args...); err != nil {
			t.Fatalf("go %s: %v\n%s\n--- main.go ---\n%s", strings.Join(args, " "), err, out, src)
		}
	}
	return bin
}

// buildPackage builds the program pkg of this repository from a module of the
// guide's, as the guide says to; it returns the binary.
func buildPackage(t *testing.T, pkg string) string {
	t.Helper()
	dir := guideModule(t)
	bin := filepath.Join(dir, "program")
	if out, err := goIn(dir, "build", "-o", bin, pkg); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// guideModule returns the directory of a new module that requires this repository
// through a replace, with its go.sum.
func guideModule(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mod := "module example.com/guide\n\ngo 1.26.0\n\nrequire github.com/baton-dev/baton v0.0.0\n\nreplace github.com/baton-dev/baton => " + root + "\n"
	for name, content := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// goIn runs the go command in dir, offline.
func goIn(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	return cmd.CombinedOutput()
}

// runGreeter runs the first program as section 3 and 4 do: three replicas, a
// labelled ConfigMap greeted by the leader, the leader stopped with SIGTERM and the
// ConfigMap greeted again by another replica in a newer term.
func runGreeter(t *testing.T, cs kubernetes.Interface, bin, kubeconfig string) {
	ctx := t.Context()
	ps := map[string]*process{}
	for _, id := range []string{"a", "b", "c"} {
		// Each replica serves metrics and probes on a port of its own.
		ps[id] = start(t, bin, "--identity", id, "--kubeconfig", kubeconfig,
			"--metrics-addr", "127.0.0.1:0", "--health-addr", "127.0.0.1:0")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default", Labels: map[string]string{"hello": "baton"}}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	greeted := func() (id string, term uint64) {
		cm, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "hello", metav1.GetOptions{})
		if err == nil {
			fmt.Sscanf(cm.Data["greeted-by"], "%s in term %d", &id, &term)
		}
		return id, term
	}
	var first string
	var term1 uint64
	batontest.WaitFor(t, 60*time.Second, "the ConfigMap greeted", func() bool { first, term1 = greeted(); return term1 != 0 })
	if holder := leaseHolder(t, cs, "greeter"); holder != first {
		t.Fatalf("greeted by %q, but %q holds the lease", first, holder)
	}
	waitObserved(t, ps, first)

	stopped := time.Now()
	if err := ps[first].stop(); err != nil {
		t.Fatalf("%s after SIGTERM: %v\n%s", first, err, ps[first].output())
	}
	var next string
	var term2 uint64
	batontest.WaitFor(t, 30*time.Second, "the ConfigMap greeted by the next leader", func() bool {
		next, term2 = greeted()
		return next != first && term2 > term1
	})
	took := time.Since(stopped)
	t.Logf("%s greeted in term %d; after its SIGTERM, %s greeted in term %d, %v later", first, term1, next, term2, took)
	// A graceful stop releases the lease: far quicker than its 15s expiry.
	if took > 10*time.Second {
		t.Errorf("the next leader greeted %v after the SIGTERM; a released lease is taken at once", took)
	}
	for id, p := range ps {
		if out := p.output(); strings.Contains(out, "SetLogger(...) was never called") || !strings.Contains(out, "level=") {
			t.Errorf("%s logs nothing of its own:\n%s", id, out)
		}
	}
}

// runIndexer runs the second program three times: the leader has the index at once,
// and so does the next leader after the first is stopped with SIGTERM.
func runIndexer(t *testing.T, cs kubernetes.Interface, bin, kubeconfig string) {
	ps := map[string]*process{}
	for _, id := range []string{"a", "b", "c"} {
		ps[id] = start(t, bin, "--identity", id, "--kubeconfig", kubeconfig)
	}
	const line = "leader has the index"
	var first string
	batontest.WaitFor(t, 60*time.Second, "a leader with the index", func() bool {
		first = leaseHolder(t, cs, "indexer")
		return ps[first] != nil && strings.Contains(ps[first].output(), line)
	})
	waitObserved(t, ps, first)
	stopped := time.Now()
	if err := ps[first].stop(); err != nil {
		t.Fatalf("%s after SIGTERM: %v\n%s", first, err, ps[first].output())
	}
	var next string
	batontest.WaitFor(t, 30*time.Second, "the next leader with the index", func() bool {
		next = leaseHolder(t, cs, "indexer")
		return next != first && ps[next] != nil && strings.Contains(ps[next].output(), line)
	})
	t.Logf("%s had the index; after its SIGTERM, %s had it %v later", first, next, time.Since(stopped))
}

// runSharded runs examples/sharded as section 6 does: three replicas and 30 labelled
// ConfigMaps, each reconciled by one of them, the shards shared evenly (as each
// replica's last "shards owned" line says); then one replica stopped with SIGTERM,
// the other two sharing its shards and reconciling its ConfigMaps.
func runSharded(t *testing.T, cs kubernetes.Interface, bin, kubeconfig string) {
	ctx := t.Context()
	ps := map[string]*process{}
	for _, id := range []string{"a", "b", "c"} {
		ps[id] = start(t, bin, "--identity", id, "--kubeconfig", kubeconfig)
	}
	for i := range 30 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("work-", i), Namespace: "default",
			Labels: map[string]string{"baton.dev/sharded": "true"}}}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// reconciledBy returns who reconciled each ConfigMap.
	reconciledBy := func() map[string]string {
		list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: "baton.dev/sharded=true"})
		if err != nil {
			t.Fatal(err)
		}
		by := map[string]string{}
		for _, cm := range list.Items {
			by[cm.Name] = cm.Data["reconciled-by"]
		}
		return by
	}
	// settled reports whether the replicas ids own the counts of shards want (by
	// their logs) and every ConfigMap was reconciled by one of them; it returns who
	// reconciled each.
	settled := func(want map[string][]int) (map[string]string, bool) {
		for id, counts := range want {
			if !slices.Contains(counts, lastShardCount(ps[id].output())) {
				return nil, false
			}
		}
		by := reconciledBy()
		for _, r := range by {
			if want[r] == nil {
				return by, false
			}
		}
		return by, len(by) == 30
	}
	var before map[string]string
	batontest.WaitFor(t, 60*time.Second, "64 shards shared by a, b and c, every ConfigMap reconciled", func() bool {
		var ok bool
		before, ok = settled(map[string][]int{"a": {21, 22}, "b": {21, 22}, "c": {21, 22}})
		return ok
	})
	stopped := time.Now()
	if err := ps["c"].stop(); err != nil {
		t.Fatalf("c after SIGTERM: %v\n%s", err, ps["c"].output())
	}
	batontest.WaitFor(t, 30*time.Second, "c's shards taken by a and b, every ConfigMap reconciled by them", func() bool {
		_, ok := settled(map[string][]int{"a": {32}, "b": {32}})
		return ok
	})
	moved := 0
	for _, r := range before {
		if r == "c" {
			moved++
		}
	}
	t.Logf("c stopped; a and b took its shards and reconciled its %d ConfigMaps %v later", moved, time.Since(stopped))
	if moved == 0 {
		t.Error("c reconciled none of the 30 ConfigMaps")
	}
}

// shardCount matches a replica's "shards owned" line of examples/sharded.
var shardCount = regexp.MustCompile(`msg="shards owned".* count=(\d+)`)

// lastShardCount returns the count of a replica's last "shards owned" line, -1 if none.
func lastShardCount(log string) int {
	n := -1
	for line := range strings.Lines(log) {
		if m := shardCount.FindStringSubmatch(line); m != nil {
			n, _ = strconv.Atoi(m[1])
		}
	}
	return n
}

// waitObserved waits until every replica but leader has logged that it observed leader
// holding the lease. Only then is a release one a follower takes at once: a release a
// candidate sees on its first look at the lease is waited out like an unknown holder
// (it may be a restored copy; see pkg/k8s/leaderelection), and the leader may be
// stopped within milliseconds of its term's start, before the others looked.
func waitObserved(t *testing.T, ps map[string]*process, leader string) {
	t.Helper()
	for id, p := range ps {
		if id == leader {
			continue
		}
		batontest.WaitFor(t, 30*time.Second, id+" observing "+leader+" leading", func() bool {
			return observed(p.output(), leader)
		})
	}
}

// observed reports whether a replica's log has the line of the elector observing
// leader as the holder of the lease.
func observed(log, leader string) bool {
	for line := range strings.Lines(log) {
		if strings.Contains(line, `msg="new leader observed"`) && strings.Contains(line, " leader="+leader+" ") {
			return true
		}
	}
	return false
}

func leaseHolder(t *testing.T, cs kubernetes.Interface, name string) string {
	l, err := cs.CoordinationV1().Leases("default").Get(t.Context(), name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// process is one replica of a guide's program, run as a process of its own.
type process struct {
	cmd    *exec.Cmd
	out    *syncBuffer
	done   chan struct{} // closed when it exited
	err    error         // its exit, once done is closed
	killed bool          // kill was called: its exit is no error
}

func start(t *testing.T, bin string, args ...string) *process {
	t.Helper()
	return startWithEnv(t, nil, bin, args...)
}

// startWithEnv starts bin with this process's environment and env added.
func startWithEnv(t *testing.T, env []string, bin string, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, args...), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(args, " "), err, p.output())
		}
	})
	return p
}

// kill sends SIGKILL, as a crash would, and waits for the exit.
func (p *process) kill() {
	p.killed = true
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop sends SIGTERM and waits for the exit; it kills the process after 30s. It
// returns the exit's error: nil for a clean exit or after kill, also on later calls.
func (p *process) stop() error {
	if p.killed {
		return nil
	}
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("no exit within 30s of SIGTERM")
	}
}

func (p *process) output() string { return p.out.String() }

// syncBuffer is a bytes.Buffer for one writer and concurrent readers.
type syncBuffer struct {
	// mu guards b.
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
